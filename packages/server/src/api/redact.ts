/**
 * OAuth codes and states, keys some clients put in a query, and the environment and argv given
 * to an exec (`env=NAME=VALUE`, `cmd=…`: commands carry credentials too, issue #19 finding 10)
 * stay out of the log.
 */
export function redactQuery(url: string): string {
  return url.replace(/([?&](?:code|state|api_key|access_token|token|key|env|cmd)=)[^&]*/gi, "$1[redacted]");
}
