import { aggregateQuery, byFields, cellText, chartPlan, valueFields, type Fields } from '../src/chart-plan';

describe('the page chart plan', () => {
  const fields: Fields = {
    team: { type: 'string', name: 'Team' },
    amount: { type: 'money', name: 'Amount' },
    at: { type: 'datetime', name: 'At' },
    units: { type: 'number', name: 'Units', optional: true },
    day: { type: 'date', name: 'Day' },
  };

  it('sums the first number-kind field over the first date or datetime field per day: a line chart', () => {
    expect(valueFields(fields)).toEqual(['amount', 'units']);
    expect(byFields(fields)).toEqual(['at', 'day', 'team']);
    expect(chartPlan(fields)).toEqual({ value: 'amount', by: 'at', bucket: 'day', kind: 'line' });
    expect(aggregateQuery(chartPlan(fields)!).toString()).toBe('op=sum&field=amount&group_by=at&bucket=day');
  });

  it("keeps the user's choices where they fit, and groups by a string field as a bar chart", () => {
    const plan = chartPlan(fields, { value: 'units', by: 'team', bucket: 'month' });
    expect(plan).toEqual({ value: 'units', by: 'team', bucket: 'month', kind: 'bar' });
    expect(aggregateQuery(plan!).toString()).toBe('op=sum&field=units&group_by=team');
    // A choice that no longer fits (another dataset's field) falls back to the default.
    expect(chartPlan(fields, { value: 'gone', by: 'team' })).toMatchObject({ value: 'amount', by: 'team' });
  });

  it('has nothing to chart without a number-kind field or without a field to group by', () => {
    expect(chartPlan({ team: { type: 'string', name: 'Team' } })).toBeUndefined();
    expect(chartPlan({ n: { type: 'number', name: 'N' } })).toBeUndefined();
  });

  it('writes cells: nulls empty, percentages as percent, numbers in full', () => {
    expect(cellText('number', null)).toBe('');
    expect(cellText('percentage', 0.125)).toBe('12.5 %');
    expect(cellText('number', 1234.5)).toBe('1,234.5');
    expect(cellText('string', 'a')).toBe('a');
  });
});
