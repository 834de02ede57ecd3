/** Reading a secret (API key, secret value) from stdin: hidden when stdin is a terminal, else the whole pipe. */

/**
 * Terminal: prints `question` on stderr, reads one line with echo off (raw mode, restored on every path).
 * Pipe or file: reads stdin to its end and drops one trailing newline, so `printf %s "$V" |` and
 * `echo "$V" |` both give V.
 */
export async function readSecret(question: string, stdin: NodeJS.ReadStream = process.stdin, err: NodeJS.WriteStream = process.stderr): Promise<string> {
  if (!stdin.isTTY) return (await readAll(stdin)).toString('utf8').replace(/\r?\n$/, '');
  // Echo off before the question shows, so nothing typed right after it is echoed.
  stdin.setRawMode(true);
  err.write(question);
  stdin.resume();
  try {
    return await new Promise<string>((resolve, reject) => {
      let line = '';
      const onData = (d: Buffer) => {
        for (const ch of d.toString('utf8')) {
          if (ch === '\r' || ch === '\n') {
            stdin.off('data', onData);
            return resolve(line);
          }
          if (ch === '\u0003' || ch === '\u0004') {
            stdin.off('data', onData);
            return reject(new Error('cancelled'));
          }
          if (ch === '\u007f' || ch === '\b') line = line.slice(0, -1);
          else line += ch;
        }
      };
      stdin.on('data', onData);
    });
  } finally {
    stdin.setRawMode(false);
    stdin.pause();
    err.write('\n');
  }
}

/** stdin to its end, as bytes. */
export async function readAll(stdin: NodeJS.ReadableStream): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of stdin) parts.push(Buffer.isBuffer(c) ? c : Buffer.from(c));
  return Buffer.concat(parts);
}
