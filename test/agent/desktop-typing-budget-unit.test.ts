import t from 'tap';
import { STROKE_MS, typingEstimateMs, typingRefusal } from '../../agent/src/desktop/typing-budget.js';

t.test('the estimate: strokes, per-character delay, binding waits, settling', async (t) => {
  t.equal(STROKE_MS, 0.5);
  t.equal(typingEstimateMs({ strokes: 1000, waitMs: 100 }, 0, 0), 600);
  t.equal(typingEstimateMs({ strokes: 1000, waitMs: 100 }, 10, 5000), 15_600);
  t.equal(typingEstimateMs({ strokes: 3, waitMs: 0 }, 0, 0), 2, 'rounded up');
});

t.test('refused only beyond 25 s, naming the field to change', async (t) => {
  t.equal(typingRefusal(25_000, 0), null);
  const text = typingRefusal(25_001, 0)!;
  t.equal(text.code, 'invalid_request');
  t.equal(
    text.message,
    'Typing this would take about 26 s; one keyboard/type call may take at most 25 s (typing and settling). Nothing was typed: send the text in shorter parts.',
  );
  t.same(text.details, [{ field: 'text', message: 'needs about 26 s to type, more than 25 s' }]);
  const delayed = typingRefusal(40_000, 20)!;
  t.match(delayed.message, /shorter parts or with a smaller delay_ms\.$/);
  t.same(delayed.details, [{ field: 'delay_ms', message: 'needs about 40 s to type, more than 25 s' }]);
});
