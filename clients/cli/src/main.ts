#!/usr/bin/env node
/** The `computer` executable (package.json `bin`): process streams and environment → runCli. */
import { makeClient, type Ctx } from './command.js';
import { runCli } from './cli.js';

let client: ReturnType<typeof makeClient> | undefined;
const ctx: Ctx = {
  out: process.stdout,
  err: process.stderr,
  stdout: process.stdout,
  stdin: process.stdin,
  env: process.env,
  client: () => (client ??= makeClient(process.env)),
};
process.exitCode = await runCli(process.argv.slice(2), ctx);
