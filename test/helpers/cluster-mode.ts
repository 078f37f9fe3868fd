/*
 * Setup of the jest project e2e-cluster: the e2e suites against pushbase installed with helm on the
 * single-node Kubernetes cluster (test/helpers/cluster-target.ts; test/helpers/server.ts reads the mode).
 * Every request crosses two socats and kube-proxy into pods sharing two cores: tests get more time.
 */
process.env.PUSHBASE_E2E_MODE = 'cluster';
jest.setTimeout(180_000);
