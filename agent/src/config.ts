import { parseArgs } from 'node:util';
import { z } from 'zod';

export const AGENT_HELP = `computer-agent: the in-guest daemon of a computer machine.

Serves HTTP/2 cleartext on a private channel handed to it (never a network address).
Every request but the enrollment must carry "Authorization: Bearer <key>", the key the control plane
installs with POST /auth/enroll (kept in memory only; see docs/security.md).

Channel (exactly one):
  --socket PATH          listen on a unix socket (container substrate, tests); created 0600
  --virtio-port PATH     serve the virtio-serial port (VM), e.g. /dev/virtio-ports/computer.agent

Enrollment:
  --enroll-file PATH     with --socket (required): where the control plane drops a one-time secret that
                         proves its enrollment to a fresh agent process; read and unlinked on use, 0600 only.
                         With --virtio-port there is no secret: the port's other end is only the host's

Desktop:
  --display :N           X display to drive (default :0); the image's init starts Xvfb, not the agent
  --fbdir DIR            directory where that display's Xvfb writes Xvfb_screen0 (default /run/xvfb)
  --display-ready PATH   file the init creates once the display is up in its default mode; the agent
                         listens at once and holds desktop requests until it appears (bounded wait,
                         then 503). Without it the display is used as soon as it answers
  --browser PATH         browser binary (default chromium)
  --browser-sandbox on|off  keep Chromium's sandbox (default on; containers pass off)

Guest:
  --agent-user NAME      unprivileged user that work runs as by default (default agent)
  --secrets-dir DIR      memory-backed directory for delivered secrets (default /run/computer)
  --profile-script PATH  login-shell hook that loads secrets (default /etc/profile.d/10-computer-secrets.sh)
  --heartbeat PATH       file rewritten every second while the event loop runs: the init kills (and so
                         restarts) an agent whose heartbeat stops (stopped with SIGSTOP, or stuck)
  --quiet                no request log lines
  -h, --help             this text
`;

export const AgentConfig = z
  .object({
    socket: z.string().optional(),
    virtioPort: z.string().optional(),
    enrollFile: z.string().min(1).optional(),
    display: z.string().regex(/^:\d+$/, 'display is :N').default(':0'),
    fbdir: z.string().default('/run/xvfb'),
    displayReady: z.string().min(1).optional(),
    browser: z.string().default('chromium'),
    browserSandbox: z.enum(['on', 'off']).default('on'),
    agentUser: z.string().default('agent'),
    secretsDir: z.string().default('/run/computer'),
    profileScript: z.string().default('/etc/profile.d/10-computer-secrets.sh'),
    heartbeat: z.string().min(1).optional(),
    quiet: z.boolean().default(false),
  })
  .refine((c) => Number(!!c.socket) + Number(!!c.virtioPort) === 1, 'give exactly one of --socket or --virtio-port')
  .refine((c) => !c.socket || !!c.enrollFile, '--socket needs --enroll-file')
  .refine((c) => !c.virtioPort || !c.enrollFile, '--enroll-file is for --socket only (a virtio port needs no secret)');
export type AgentConfig = z.infer<typeof AgentConfig>;

export type ParsedArgs = { help: true } | { help: false; config: AgentConfig };

/** Flags → validated config. Throws with a readable message on bad flags. */
export function parseAgentArgs(argv: string[]): ParsedArgs {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      socket: { type: 'string' },
      'virtio-port': { type: 'string' },
      'enroll-file': { type: 'string' },
      display: { type: 'string' },
      fbdir: { type: 'string' },
      'display-ready': { type: 'string' },
      browser: { type: 'string' },
      'browser-sandbox': { type: 'string' },
      'agent-user': { type: 'string' },
      'secrets-dir': { type: 'string' },
      'profile-script': { type: 'string' },
      heartbeat: { type: 'string' },
      quiet: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) return { help: true };
  const r = AgentConfig.safeParse({
    socket: values.socket,
    virtioPort: values['virtio-port'],
    enrollFile: values['enroll-file'],
    display: values.display,
    fbdir: values.fbdir,
    displayReady: values['display-ready'],
    browser: values.browser,
    browserSandbox: values['browser-sandbox'],
    agentUser: values['agent-user'],
    secretsDir: values['secrets-dir'],
    profileScript: values['profile-script'],
    heartbeat: values.heartbeat,
    quiet: values.quiet,
  });
  if (!r.success) throw new Error(r.error.issues.map((i) => (i.path.length ? `${i.path.join('.')}: ` : '') + i.message).join('; '));
  return { help: false, config: r.data };
}
