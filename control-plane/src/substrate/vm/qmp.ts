/** A minimal QMP client: one connection, commands in order, events ignored. */
import net from 'node:net';

export class QmpError extends Error {
  constructor(
    readonly qmpClass: string,
    message: string,
  ) {
    super(message);
  }
}

export class Qmp {
  private buf = '';
  private waiters: Array<{ resolve: (v: unknown) => void; reject: (e: Error) => void }> = [];
  private closed = false;

  private constructor(private readonly sock: net.Socket) {
    sock.setEncoding('utf8');
    sock.on('data', (d: string) => this.onData(d));
    const fail = (e: Error) => {
      this.closed = true;
      for (const w of this.waiters.splice(0)) w.reject(e);
    };
    sock.on('error', fail);
    sock.on('close', () => fail(new Error('qmp connection closed')));
  }

  static async connect(socketPath: string, timeoutMs = 5000): Promise<Qmp> {
    const sock = await new Promise<net.Socket>((resolve, reject) => {
      const s = net.connect(socketPath);
      const timer = setTimeout(() => {
        s.destroy();
        reject(new Error('qmp connect timeout'));
      }, timeoutMs);
      s.once('connect', () => {
        clearTimeout(timer);
        resolve(s);
      });
      s.once('error', (e) => {
        clearTimeout(timer);
        reject(e);
      });
    });
    const q = new Qmp(sock);
    await q.next(); // greeting
    await q.execute('qmp_capabilities');
    return q;
  }

  private onData(d: string): void {
    this.buf += d;
    let i: number;
    while ((i = this.buf.indexOf('\n')) >= 0) {
      const line = this.buf.slice(0, i).trim();
      this.buf = this.buf.slice(i + 1);
      if (!line) continue;
      let msg: { event?: string; error?: { class: string; desc: string }; return?: unknown; QMP?: unknown };
      try {
        msg = JSON.parse(line);
      } catch {
        continue;
      }
      if (msg.event) continue;
      const w = this.waiters.shift();
      if (!w) continue;
      if (msg.error) w.reject(new QmpError(msg.error.class, msg.error.desc));
      else w.resolve(msg.return ?? msg.QMP);
    }
  }

  private next(): Promise<unknown> {
    if (this.closed) return Promise.reject(new Error('qmp connection closed'));
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }

  execute(command: string, args?: Record<string, unknown>): Promise<unknown> {
    const p = this.next();
    this.sock.write(JSON.stringify(args ? { execute: command, arguments: args } : { execute: command }) + '\n');
    return p;
  }

  close(): void {
    this.sock.destroy();
  }
}
