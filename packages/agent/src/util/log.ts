/** One line of the agent's log: JSON on stderr, which the host keeps as the unit's agent.log. */
export function log(msg: string, fields: Record<string, unknown> = {}): void {
  process.stderr.write(`${JSON.stringify({ time: new Date().toISOString(), msg, ...fields })}\n`);
}
