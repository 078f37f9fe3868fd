import { describeReadApiContract, memoryReadFixture } from './read-api.contract';

describeReadApiContract('MemoryProjection (embedded)', memoryReadFixture, 60);
