import { ReadShares } from '../src/read-shares';

function shares(): { s: ReadShares; advance: (ms: number) => void } {
  let t = 0;
  return { s: new ReadShares({ heavyMsPerSecond: 250, halfLifeMs: 5000, now: () => t }), advance: (ms) => (t += ms) };
}

describe('ReadShares', () => {
  it('keeps an account that reads a little at priority 1 and lowers one that keeps ClickHouse busy', () => {
    const { s, advance } = shares();
    // Light: 20 ms of reads every second, for a minute.
    for (let i = 0; i < 60; i++) {
      s.record('light', 20);
      advance(1000);
    }
    expect(s.priorityOf('light')).toBe(1);
    // Heavy: 600 ms of reads every second (more than half a core), within a few seconds.
    for (let i = 0; i < 5; i++) {
      s.record('heavy', 600);
      advance(1000);
    }
    expect(s.priorityOf('heavy')).toBe(2);
    expect(s.priorityOf('light')).toBe(1);
    expect(s.priorityOf('never-read')).toBe(1);
  });

  it('forgets past use: an account that stops reading comes back to priority 1 within a few half-lives', () => {
    const { s, advance } = shares();
    for (let i = 0; i < 30; i++) {
      s.record('a', 800);
      advance(1000);
    }
    expect(s.priorityOf('a')).toBe(2);
    advance(5000);
    expect(s.priorityOf('a')).toBe(2);
    advance(15_000);
    expect(s.priorityOf('a')).toBe(1);
  });

  it('puts a steady rate a fifth under the threshold at 1 and a fifth over it at 2', () => {
    const { s, advance } = shares();
    for (let i = 0; i < 120; i++) {
      s.record('under', 200);
      s.record('over', 300);
      advance(1000);
    }
    expect(s.priorityOf('under')).toBe(1);
    expect(s.priorityOf('over')).toBe(2);
  });

  it('drops accounts whose use decayed to nothing once it tracks many', () => {
    const { s, advance } = shares();
    for (let i = 0; i < 1001; i++) s.record(`old-${i}`, 10);
    advance(600_000);
    s.record('new', 10);
    expect((s as unknown as { uses: Map<string, unknown> }).uses.size).toBeLessThan(1001);
  });
});
