/** An upstream (a unit's port, a provider) did not accept the connection, or did not answer, in time. */
export class UpstreamTimeout extends Error {}
