import type { Metadata } from '@grpc/grpc-js';
import { context, propagation, type Context } from '@pushbase/telemetry';

/*
 * W3C trace context (`traceparent`, `tracestate`) in a call's metadata, beside `x-request-id`: the gateway's
 * client span becomes the parent of the service's server span. Nothing is sent while tracing is off.
 */

const getter = {
  keys: (m: Metadata): string[] => Object.keys(m.getMap()),
  get: (m: Metadata, key: string): string | undefined => {
    const v = m.get(key)[0];
    return typeof v === 'string' ? v : undefined;
  },
};

const setter = { set: (m: Metadata, key: string, value: string): void => m.set(key, value) };

/** The caller's trace context, or the active one (no parent) when the call carries none. */
export const contextFromMetadata = (metadata: Metadata): Context => propagation.extract(context.active(), metadata, getter);

/** Writes `ctx`'s trace context into the call's metadata. */
export const injectIntoMetadata = (ctx: Context, metadata: Metadata): void => propagation.inject(ctx, metadata, setter);
