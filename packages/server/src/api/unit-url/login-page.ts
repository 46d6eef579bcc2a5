const html = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] ?? c);

/**
 * The login form of a unit URL. The token is posted to the unit host itself (never put in a URL),
 * exchanged once for the session cookie, and not kept by the page.
 */
export function loginPage(opts: { host: string; next: string; message?: string | undefined }): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Log in to ${html(opts.host)}</title>
<style>
body{font-family:system-ui,sans-serif;max-width:28rem;margin:4rem auto;padding:0 1rem;color:#222}
input{width:100%;box-sizing:border-box;padding:.5rem;margin:.5rem 0;font:inherit}
button{padding:.5rem 1rem;font:inherit}
.err{color:#b00020}
</style>
</head>
<body>
<h1>Log in</h1>
<p><code>${html(opts.host)}</code> is a private unit URL. Paste an API token of the unit's organization
(<code>ums token create</code>); it is exchanged once for a session cookie of this host only.</p>
${opts.message ? `<p class="err" role="alert">${html(opts.message)}</p>` : ""}
<form method="post" action="/.ums/login">
<input type="hidden" name="next" value="${html(opts.next)}">
<label for="token">API token</label>
<input id="token" name="token" type="password" autocomplete="off" required autofocus>
<button type="submit">Log in</button>
</form>
</body>
</html>
`;
}
