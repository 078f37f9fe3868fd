/*
 * Credentials never leave the process in an answer, and never reach a log line: connection URLs
 * (`http://user:secret@clickhouse:8123`, `redis://:secret@redis:6379`) are configuration, and their
 * user-info part is the one piece of them that is a secret.
 */

// The scheme's length is bounded so that text a client chose (`a.a.a.…`) cannot make the search quadratic.
const USER_INFO = /\b([a-z][a-z0-9+.-]{0,31}:\/\/)[^\s/?#@]*@/gi;

/** `url` without its user name and password (`http://***@host:8123/` when it had any). */
export const redactUrl = (url: string): string => url.replace(USER_INFO, '$1***@');

/** Every URL's user-info in a free text (an error message, a log line) replaced by `***`. */
export const redactCredentials = (text: string): string => text.replace(USER_INFO, '$1***@');
