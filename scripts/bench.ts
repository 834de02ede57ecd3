// `npm run bench`: prints figures, never asserts. Parts: BENCH=agent,gateway,api,pool,container,memory,snapshots,ports,forward,vm,transfer,store,events,placement,crosshost (default: all);
// BENCH=screen is the gateway's screen encodings only (BENCH_AGENT_PROFILE=dir: the agent's CPU profile there).
// BENCH=pgwrites (not in the default: about six minutes of mostly waiting) counts PostgreSQL writes per machine (docs/scale.md).
import path from 'node:path';
import { benchAgent } from './bench/agent.js';
import { benchApi } from './bench/api.js';
import { benchEvents } from './bench/events.js';
import { benchCrossHost } from './bench/cross-host.js';
import { benchForward } from './bench/forward.js';
import { benchGateway } from './bench/gateway.js';
import { benchMemory } from './bench/memory.js';
import { benchPlacement } from './bench/placement.js';
import { benchPgWrites } from './bench/pg-writes.js';
import { benchPool } from './bench/pool.js';
import { benchPorts } from './bench/ports.js';
import { benchSnapshots } from './bench/snapshots.js';
import { benchStore } from './bench/store.js';
import { benchContainer, benchVm } from './bench/substrates.js';
import { benchTransfer } from './bench/transfer.js';

const parts = new Set((process.env.BENCH ?? 'agent,gateway,api,pool,container,memory,snapshots,ports,forward,vm,transfer,store,events,placement,crosshost').split(',').map((s) => s.trim()));
const repoRoot = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');

async function main(): Promise<void> {
  if (parts.has('agent')) await benchAgent();
  if (parts.has('gateway')) await benchGateway();
  if (parts.has('screen')) await benchGateway({ screenOnly: true, agentProfileDir: process.env.BENCH_AGENT_PROFILE });
  if (parts.has('api')) await benchApi({ substrate: 'container' });
  if (parts.has('pool')) await benchPool({ repoRoot });
  if (parts.has('container')) await benchContainer({ repoRoot });
  if (parts.has('memory')) await benchMemory({ repoRoot });
  if (parts.has('snapshots')) await benchSnapshots({ repoRoot });
  if (parts.has('ports')) await benchPorts({ repoRoot });
  if (parts.has('forward')) await benchForward();
  if (parts.has('vm')) await benchVm({ repoRoot });
  if (parts.has('transfer')) await benchTransfer();
  if (parts.has('store')) await benchStore();
  if (parts.has('events')) await benchEvents();
  if (parts.has('placement')) await benchPlacement();
  if (parts.has('crosshost')) await benchCrossHost({ repoRoot });
  if (parts.has('pgwrites')) await benchPgWrites();
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
