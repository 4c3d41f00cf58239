// A Server-Sent Events reader following the WHATWG rules: lines end with CRLF,
// LF or CR; a line starting with ":" is a comment (the server's keep-alives);
// `data` lines accumulate, joined by "\n"; a blank line dispatches the event;
// an event cut off by the end of the stream is dropped.

/** One dispatched event. */
export interface ServerSentEvent {
  /** The `event` field, `"message"` when absent. */
  event: string;
  /** The `data` lines joined by "\n". */
  data: string;
  /** The last `id` field seen, if any. */
  id: string | undefined;
}

/** Turns text chunks into events; feed it with `push`, each call returns the events completed. */
export class SSEDecoder {
  #buffer = "";
  #pendingCR = false;
  #event = "";
  #data: string[] = [];
  #hasData = false;
  #lastId: string | undefined;

  push(chunk: string): ServerSentEvent[] {
    const out: ServerSentEvent[] = [];
    let text = chunk;
    // A CR at the end of the previous chunk may be the first half of a CRLF.
    if (this.#pendingCR) {
      this.#pendingCR = false;
      if (text.startsWith("\n")) text = text.slice(1);
    }
    this.#buffer += text;
    let start = 0;
    for (let i = 0; i < this.#buffer.length; i++) {
      const c = this.#buffer[i];
      if (c !== "\n" && c !== "\r") continue;
      const line = this.#buffer.slice(start, i);
      if (c === "\r") {
        if (i + 1 < this.#buffer.length) {
          if (this.#buffer[i + 1] === "\n") i++;
        } else {
          this.#pendingCR = true;
        }
      }
      start = i + 1;
      const event = this.#line(line);
      if (event) out.push(event);
    }
    this.#buffer = this.#buffer.slice(start);
    return out;
  }

  #line(line: string): ServerSentEvent | undefined {
    if (line === "") return this.#dispatch();
    if (line.startsWith(":")) return undefined;
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    switch (field) {
      case "event":
        this.#event = value;
        break;
      case "data":
        this.#data.push(value);
        this.#hasData = true;
        break;
      case "id":
        if (!value.includes("\0")) this.#lastId = value;
        break;
      default:
        // `retry` and unknown fields: nothing to do for a one-shot reader.
        break;
    }
    return undefined;
  }

  #dispatch(): ServerSentEvent | undefined {
    const event = this.#event || "message";
    const data = this.#data.join("\n");
    const had = this.#hasData;
    this.#event = "";
    this.#data = [];
    this.#hasData = false;
    if (!had) return undefined;
    return { event, data, id: this.#lastId };
  }
}
