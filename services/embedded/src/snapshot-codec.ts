/*
 * The codec of one dataset in a version-2 snapshot, by job: the frame's shared vocabulary
 * (snapshot-columns.ts), the encoder and what a snapshot captures (snapshot-encode.ts), the lazy decoder
 * (snapshot-decode.ts) and the free-space estimate (snapshot-estimate.ts). The layout and why:
 * docs/embedded-storage.md → Snapshot dataset frames.
 */

export { SnapshotDecodeError } from './snapshot-columns';
export { captureDataset, completeRows, encodeDataset, releaseCaptured, rowsOf, type CapturedDataset, type DatasetColumns, type DatasetRows } from './snapshot-encode';
export { decodeDataset, LazyRows, SnapshotSource, type EncodedRows } from './snapshot-decode';
export { estimateDatasetBytes } from './snapshot-estimate';
