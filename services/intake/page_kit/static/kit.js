// Gradeq page kit: what the intake's pages (operator dashboard, review page) share.
// Loaded before a page's own script. No build step and no third-party code.
// It holds no state: a page's key reaches it only through the function the page passes to
// pageKit.caller, so the key stays in that page's script, never in storage or in here.
"use strict";

const pageKit = (() => {
  // An element with attributes and children (nodes or text, never markup).
  function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value);
    for (const child of children) node.append(child);
    return node;
  }

  // call(path, options) for the API at `api` (a URL), with the key currentKey() returns now.
  // A refusal (problem+json) becomes an Error reading "<type's last segment>: <detail>".
  function caller(api, currentKey) {
    return async function call(path, options = {}) {
      const response = await fetch(new URL(path, api), {
        ...options,
        headers: { Authorization: `Bearer ${currentKey()}`, "Content-Type": "application/json" },
      });
      const body = await response.json();
      if (!response.ok) {
        throw new Error(`${(body.type || "").split("/").pop() || response.status}: ${body.detail || ""}`);
      }
      return body;
    };
  }

  return Object.freeze({ el, caller });
})();
