// xterm.js writes its dynamic styles (cell sizes, theme, true colours) as <style> text and style
// attributes, both of which a Content-Security-Policy without 'unsafe-inline' refuses. The CSS
// object model is not subject to that policy, so this module, loaded before xterm.js, routes them
// through it: a <style> element's text goes into a constructed style sheet adopted by the
// document (dropped again when the element is removed), and the element itself is never put into
// the document (even an empty one is refused, and reported); a style attribute goes into
// `style.cssText`. Nothing else in the console makes <style> elements.
const sheets = new WeakMap<HTMLStyleElement, CSSStyleSheet>();
const texts = new WeakMap<HTMLStyleElement, string>();
const proto = HTMLStyleElement.prototype;

Object.defineProperty(proto, "textContent", {
  configurable: true,
  get(this: HTMLStyleElement) {
    return texts.get(this) ?? "";
  },
  set(this: HTMLStyleElement, css: string | null) {
    let sheet = sheets.get(this);
    if (!sheet) {
      sheet = new CSSStyleSheet();
      sheets.set(this, sheet);
      document.adoptedStyleSheets = [...document.adoptedStyleSheets, sheet];
    }
    texts.set(this, css ?? "");
    sheet.replaceSync(css ?? "");
  },
});

const remove = Element.prototype.remove;
proto.remove = function (this: HTMLStyleElement) {
  const sheet = sheets.get(this);
  if (sheet) {
    document.adoptedStyleSheets = document.adoptedStyleSheets.filter((s) => s !== sheet);
    sheets.delete(this);
  }
  if (this.isConnected) remove.call(this);
};

const appendChild = Node.prototype.appendChild;
Node.prototype.appendChild = function <T extends Node>(this: Node, node: T): T {
  if (node instanceof HTMLStyleElement) return node;
  return appendChild.call(this, node) as T;
};

const setAttribute = Element.prototype.setAttribute;
Element.prototype.setAttribute = function (this: Element, name: string, value: string) {
  if (name === "style" && this instanceof HTMLElement) this.style.cssText = value;
  else setAttribute.call(this, name, value);
};
