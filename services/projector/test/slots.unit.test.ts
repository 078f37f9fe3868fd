import fc from 'fast-check';
import { FIRST_SLOT, RowSlots } from '../src/slots';

describe('RowSlots', () => {
  it('gives the lowest free slot, from 1, and a released slot to the next row', () => {
    const slots = new RowSlots();
    expect(['a', 'b', 'c', 'd'].map((k) => slots.take(k))).toStrictEqual([1, 2, 3, 4]);
    expect(slots.release('c')).toBe(3);
    expect(slots.release('a')).toBe(1);
    expect(slots.release('a')).toBeUndefined();
    expect([slots.take('e'), slots.take('f'), slots.take('g')]).toStrictEqual([1, 3, 5]);
    expect(slots.get('f')).toBe(3);
    expect(slots.size).toBe(5);
  });

  it('assigns from slots loaded back exactly what the held ring would (the lowest free slot depends on the live slots alone)', () => {
    fc.assert(
      fc.property(fc.array(fc.oneof(fc.constant<'take'>('take'), fc.nat({ max: 40 })), { maxLength: 200 }), fc.nat({ max: 200 }), (ops, reloadAt) => {
        let held = new RowSlots();
        const twin: number[] = [];
        let next = 0;
        let most = 0;
        for (const [i, op] of ops.entries()) {
          // A reload: the live rows and their slots, in any order, as a store gives them back.
          if (i === reloadAt) held = RowSlots.of([...held.entries()].reverse());
          if (op === 'take') {
            const s = held.take(next++);
            // The lowest slot no live row holds.
            let lowest = FIRST_SLOT;
            while (twin.includes(lowest)) lowest++;
            expect(s).toBe(lowest);
            twin.push(s);
          } else {
            const s = held.release(op);
            if (s !== undefined) twin.splice(twin.indexOf(s), 1);
          }
          // Every slot below a taken one is taken: no slot exceeds the most rows held at once.
          most = Math.max(most, twin.length);
          expect(Math.max(0, ...twin)).toBeLessThanOrEqual(most);
        }
      }),
    );
  });

  it('refuses slots given twice or below 1', () => {
    expect(() => RowSlots.of([['a', 1], ['b', 1]])).toThrow(/given twice/);
    expect(() => RowSlots.of([['a', 0]])).toThrow(/from 1/);
  });
});
