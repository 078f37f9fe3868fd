import { controllerManagerArgs, schedulerArgs } from '../../deploy/cluster/manifests';
import { POD_CIDR, SERVICE_CIDR } from '../../deploy/cluster/config';

/*
 * The command lines of the cluster's controller manager and scheduler (deploy/cluster/manifests.ts), as
 * the cluster has run them: the cluster's own suites cannot run beside CI's cluster, so this pins them.
 */

const client = (kubeconfig: string): string =>
  `--kubeconfig=${kubeconfig} --authentication-kubeconfig=${kubeconfig} --authorization-kubeconfig=${kubeconfig} --bind-address=127.0.0.1 --leader-elect=false`;

test('the controller manager talks to the API server with its kubeconfig, on loopback, alone, signing with the CA', () => {
  expect(controllerManagerArgs('/k/cm.conf', { ca: '/p/ca.crt', caKey: '/p/ca.key', saKey: '/p/sa.key' }).join(' ')).toBe(
    `${client('/k/cm.conf')} --root-ca-file=/p/ca.crt --cluster-signing-cert-file=/p/ca.crt --cluster-signing-key-file=/p/ca.key ` +
      '--service-account-private-key-file=/p/sa.key --use-service-account-credentials=true --allocate-node-cidrs=true ' +
      `--cluster-cidr=${POD_CIDR} --node-cidr-mask-size=24 --service-cluster-ip-range=${SERVICE_CIDR} --profiling=false`,
  );
});

test('the scheduler talks to the API server with its kubeconfig, on loopback, alone', () => {
  expect(schedulerArgs('/k/s.conf').join(' ')).toBe(`${client('/k/s.conf')} --profiling=false`);
});
