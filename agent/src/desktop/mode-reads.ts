/**
 * Which of several overlapping reads of the display's modes may set the cached size: the one that
 * STARTED last among those finished. A read is a child process (xrandr) that sees the server at some
 * moment between its start and its end, so a read that started before a mode switch finished may
 * answer the old size after a read that started later (a resize's own read, or the read an input call
 * makes when the screen changed) answered the new one; applying it would put the old size back and
 * refuse every coordinate beyond it. Each read takes a ticket when it starts; its answer is applied
 * only if no later ticket was applied first. Reads never wait for each other (nor for the input lock).
 */
export class LatestStartedRead {
  private issued = 0;
  private applied = 0;

  /** Call right before starting a read; pass the ticket to `keep` with its answer. */
  begin(): number {
    return ++this.issued;
  }

  /**
   * Whether the answer of read `ticket` is to be applied (and, when true, it now is the applied one).
   * The caller applies it synchronously after a true answer, with no await in between.
   */
  keep(ticket: number): boolean {
    if (ticket <= this.applied) return false;
    this.applied = ticket;
    return true;
  }
}
