import { z } from 'zod';
import { blankToUndefined, parseEnv } from '@pushbase/config';
import { isIdentifier } from './sql';
import { checkViewsDatabase, defaultViewsDatabase } from './views';

/*
 * The ClickHouse settings, parsed once where a command starts (`pushbase migrate`, the projector). Unset
 * and empty variables both mean "use the default".
 */

/** The variables, for services whose own schema includes ClickHouse (the projector). */
export const clickhouseEnv = {
  PUSHBASE_CLICKHOUSE_URL: z.preprocess(
    blankToUndefined,
    z
      .string()
      .default('http://127.0.0.1:8123')
      .refine((u) => URL.canParse(u) && /^https?:$/.test(new URL(u).protocol), 'PUSHBASE_CLICKHOUSE_URL must be an http(s) URL such as http://127.0.0.1:8123'),
  ),
  PUSHBASE_CLICKHOUSE_DATABASE: z.preprocess(
    blankToUndefined,
    z.string().default('pushbase').refine(isIdentifier, 'PUSHBASE_CLICKHOUSE_DATABASE must be 1 to 63 of A-Z a-z 0-9 _, not starting with a digit'),
  ),
  /** The Grafana-ready views, one per live dataset (views.ts). Default: the database's name with `_views`. */
  PUSHBASE_CLICKHOUSE_VIEWS_DATABASE: z.preprocess(
    blankToUndefined,
    z.string().refine(isIdentifier, 'PUSHBASE_CLICKHOUSE_VIEWS_DATABASE must be 1 to 63 of A-Z a-z 0-9 _, not starting with a digit').optional(),
  ),
};

/** The views database in force: the variable's value, else `<database>_views` (views.ts). */
export function viewsDatabaseOf(env: { readonly PUSHBASE_CLICKHOUSE_DATABASE: string; readonly PUSHBASE_CLICKHOUSE_VIEWS_DATABASE?: string | undefined }): string {
  const views = env.PUSHBASE_CLICKHOUSE_VIEWS_DATABASE ?? defaultViewsDatabase(env.PUSHBASE_CLICKHOUSE_DATABASE);
  checkViewsDatabase(env.PUSHBASE_CLICKHOUSE_DATABASE, views);
  return views;
}

const schema = z.object(clickhouseEnv);

export interface ClickHouseConfig {
  readonly url: string;
  readonly database: string;
  readonly viewsDatabase: string;
}

/** Parses the environment; a bad value throws with every problem listed. */
export function loadClickHouseConfig(env: NodeJS.ProcessEnv = process.env): ClickHouseConfig {
  const c = parseEnv(schema, env);
  return Object.freeze({ url: c.PUSHBASE_CLICKHOUSE_URL, database: c.PUSHBASE_CLICKHOUSE_DATABASE, viewsDatabase: viewsDatabaseOf(c) });
}
