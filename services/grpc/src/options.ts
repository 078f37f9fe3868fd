import type { ChannelOptions } from '@grpc/grpc-js';

/*
 * Channel options shared by pushbase's gRPC servers and clients.
 */

/**
 * A request body may be 4 MiB (the gateway's limit) and travels whole in `body_json`, with the account,
 * the id and the protobuf framing on top; gRPC's default limit of 4 MiB per message would refuse the
 * largest legal writes. 8 MiB leaves room without letting a message grow unbounded.
 */
export const MAX_MESSAGE_BYTES = 8 * 1024 * 1024;

/**
 * Server: ping a connection idle for 60 s and drop it when no answer comes within 20 s, so the
 * connections of gateways that vanished without a FIN (a killed pod, a partition) are reclaimed instead
 * of holding streams and memory forever. Connections are also recycled after 30 min (with a grace of
 * 30 s for their calls to finish), so that clients re-resolve the service name and spread over replicas
 * added since they connected.
 */
export const SERVER_CHANNEL_OPTIONS: Readonly<ChannelOptions> = Object.freeze({
  'grpc.keepalive_time_ms': 60_000,
  'grpc.keepalive_timeout_ms': 20_000,
  'grpc.max_connection_age_ms': 30 * 60_000,
  'grpc.max_connection_age_grace_ms': 30_000,
  'grpc.max_receive_message_length': MAX_MESSAGE_BYTES,
  'grpc.max_send_message_length': MAX_MESSAGE_BYTES,
});

/**
 * Client: ping every 30 s, also while no call is open (permit_without_calls), and call the connection
 * dead after 10 s without an answer. A gateway keeps its channel open between bursts of requests; without
 * pings a silently dead connection (the service's host gone, a NAT entry expired) would be found only by
 * the next request, which would then wait out its whole deadline and end as outcome_unknown. With pings
 * the channel notices within ~40 s and reconnects, and a request finding no connection fails fast and
 * provably unsent (503). C-core servers refuse idle pings more often than every 5 min by default
 * (GOAWAY too_many_pings); pushbase's servers are grpc-js, which enforces no such minimum. A proxy in
 * between that does needs a permissive ping policy.
 */
export const CLIENT_CHANNEL_OPTIONS: Readonly<ChannelOptions> = Object.freeze({
  'grpc.keepalive_time_ms': 30_000,
  'grpc.keepalive_timeout_ms': 10_000,
  'grpc.keepalive_permit_without_calls': 1,
  'grpc.max_receive_message_length': MAX_MESSAGE_BYTES,
  'grpc.max_send_message_length': MAX_MESSAGE_BYTES,
  // Reconnect quickly after a service restarts (the default backoff grows to 120 s).
  'grpc.initial_reconnect_backoff_ms': 250,
  'grpc.max_reconnect_backoff_ms': 5_000,
});
