/**
 * The floor of the `crosshost` bench (scripts/bench/cross-host.ts): the least a hop through another Node process costs.
 * A bare HTTP proxy in a child with its own event loop, as B is: keep-alive to A, each request piped to A's public
 * listener and its answer piped back, nothing authenticated, signed, checked or stripped beyond the hop-by-hop headers.
 * What B costs over this, in the same run, is what the service's forward adds beyond the hop itself.
 * argv[2]: A's URL. Prints `ready <url>` once listening; exits when stdin ends.
 */
import http from 'node:http';
import { responseHeadersForCaller } from '../../control-plane/src/cluster/forward/headers.js';

const [to] = process.argv.slice(2);
if (!to) throw new Error('usage: cross-host-proxy.js A_URL');
const target = new URL(to);
const agent = new http.Agent({ keepAlive: true });

/** Every header but the hop-by-hop ones (and those Connection names), as a flat list: the forward's own rule, both ways. */
const endToEnd = responseHeadersForCaller;

const server = http.createServer((req, res) => {
  const up = http.request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: endToEnd(req.rawHeaders), agent }, (answer) => {
    res.writeHead(answer.statusCode ?? 502, endToEnd(answer.rawHeaders));
    answer.pipe(res);
  });
  up.on('error', () => res.destroy());
  req.pipe(up);
});
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  if (!address || typeof address === 'string') throw new Error('no address');
  process.stdout.write(`ready http://127.0.0.1:${address.port}\n`);
});
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
