import t from 'tap';
import { planView } from '../../agent/src/desktop/view.js';

const D = { width: 1920, height: 1080 };

t.test('no view fields: the plain screenshot', async (t) => {
  t.equal(planView(D, {}), null);
});

t.test('scaling keeps the aspect ratio unless both sides are given', async (t) => {
  t.same(planView(D, { width: 1280 }), { region: { x: 0, y: 0, width: 1920, height: 1080 }, width: 1280, height: 720, scale: { x: 1280 / 1920, y: 720 / 1080 } });
  t.same(planView(D, { height: 540 }), { region: { x: 0, y: 0, width: 1920, height: 1080 }, width: 960, height: 540, scale: { x: 0.5, y: 0.5 } });
  t.same(planView(D, { width: 1024, height: 768 }), { region: { x: 0, y: 0, width: 1920, height: 1080 }, width: 1024, height: 768, scale: { x: 1024 / 1920, y: 768 / 1080 } });
  t.same(planView(D, { max_side: 1000 }), { region: { x: 0, y: 0, width: 1920, height: 1080 }, width: 1000, height: 563, scale: { x: 1000 / 1920, y: 563 / 1080 } });
  t.same(planView(D, { max_side: 4000 }), { region: { x: 0, y: 0, width: 1920, height: 1080 }, width: 1920, height: 1080, scale: { x: 1, y: 1 } }, 'max_side never scales up');
});

t.test('a region is cropped, then scaled (zoom)', async (t) => {
  t.same(planView(D, { region: { x: 100, y: 200, width: 300, height: 150 } }), { region: { x: 100, y: 200, width: 300, height: 150 }, width: 300, height: 150, scale: { x: 1, y: 1 } });
  t.same(planView(D, { region: { x: 100, y: 200, width: 300, height: 150 }, width: 900 }), { region: { x: 100, y: 200, width: 300, height: 150 }, width: 900, height: 450, scale: { x: 3, y: 3 } });
  t.same(planView(D, { region: { x: 1620, y: 980, width: 300, height: 100 } })?.region, { x: 1620, y: 980, width: 300, height: 100 }, 'touching the edges is inside');
});

t.test('refusals name the field', async (t) => {
  const fields = (f: () => unknown) => {
    try {
      f();
      return null;
    } catch (e) {
      return (e as { details: Array<{ field: string }> }).details.map((d) => d.field);
    }
  };
  t.same(fields(() => planView(D, { region: { x: 1621, y: 0, width: 300, height: 10 } })), ['region']);
  t.same(fields(() => planView(D, { region: { x: 0, y: 1000, width: 10, height: 81 } })), ['region']);
  t.same(fields(() => planView(D, { max_side: 500, width: 100 })), ['max_side']);
});
