import t from 'tap';
import { chunkLines, clickBatches, dragLines, hotkeyLines, keyLines, modifierLines, scrollLines, typeLines } from '../../agent/src/desktop/input-script.js';

const none = modifierLines([]);
const shiftCtrl = modifierLines([50, 37]);

t.test('modifiers press in order and release in reverse', async (t) => {
  t.same(shiftCtrl, { down: ['keydown --delay 0 50', 'keydown --delay 0 37'], up: ['keyup --delay 0 37', 'keyup --delay 0 50'] });
});

t.test('clicks', async (t) => {
  t.same(clickBatches({ button: 'left', count: 1 }, none), [['click --repeat 1 --delay 0 1']]);
  t.same(clickBatches({ at: { x: 10, y: 20 }, button: 'right', count: 1 }, shiftCtrl), [
    ['mousemove 10 20', 'keydown --delay 0 50', 'keydown --delay 0 37', 'click --repeat 1 --delay 0 3', 'keyup --delay 0 37', 'keyup --delay 0 50'],
  ]);
  t.same(
    clickBatches({ at: { x: 5, y: 6 }, button: 'left', count: 3 }, modifierLines([50])),
    [['mousemove 5 6', 'keydown --delay 0 50', 'click --repeat 1 --delay 0 1'], ['click --repeat 1 --delay 0 1'], ['click --repeat 1 --delay 0 1', 'keyup --delay 0 50']],
    'a triple click is three batches, modifiers held across them',
  );
  t.same(clickBatches({ button: 'middle', count: 2, down: true }, none), [['mousedown 2']], 'down ignores count');
  t.same(clickBatches({ button: 'middle', count: 1, up: true }, none), [['mouseup 2']]);
});

t.test('drag and scroll', async (t) => {
  t.same(dragLines({ x: 0, y: 0 }, { x: 10, y: 5 }, 3, 'left', modifierLines([64])), [
    'mousemove 0 0',
    'keydown --delay 0 64',
    'mousedown 1',
    'mousemove 3 2',
    'mousemove 7 3',
    'mousemove 10 5',
    'mouseup 1',
    'keyup --delay 0 64',
  ]);
  t.same(scrollLines({ direction: 'down', amount: 3 }, none), ['click --repeat 3 --delay 0 5']);
  t.same(scrollLines({ at: { x: 1, y: 2 }, direction: 'left', amount: 1 }, modifierLines([50])), ['mousemove 1 2', 'keydown --delay 0 50', 'click --repeat 1 --delay 0 6', 'keyup --delay 0 50']);
});

t.test('keys and typing', async (t) => {
  t.same(keyLines(36, { repeat: 3 }), ['key --delay 0 36 36 36']);
  t.same(keyLines(36, { repeat: 1, down: true }), ['keydown --delay 0 36']);
  t.same(keyLines(36, { repeat: 1, up: true }), ['keyup --delay 0 36']);
  t.same(hotkeyLines([37, 50, 28]), ['keydown --delay 0 37', 'keydown --delay 0 50', 'keydown --delay 0 28', 'keyup --delay 0 28', 'keyup --delay 0 50', 'keyup --delay 0 37']);
  t.same(typeLines([{ keycode: 38, shift: false }, { keycode: 38, shift: true }], 50, 0), ['key --delay 0 38 50+38']);
  t.same(typeLines([{ keycode: 38, shift: false }, { keycode: 39, shift: false }], 50, 25), ['key --delay 0 38', 'sleep 0.025', 'key --delay 0 39', 'sleep 0.025']);
  const long = chunkLines('key --delay 0', Array<string>(450).fill('38'));
  t.same(long.map((l) => l.split(' ').length - 3), [200, 200, 50], '200 keys per line');
});
