package taskgate

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strings"
)

// StreamEventType is the kind of a StreamEvent.
type StreamEventType string

const (
	// StreamEventDelta is a piece of generated text, in StreamEvent.Text.
	StreamEventDelta StreamEventType = "delta"
	// StreamEventReasoning is a piece of the model's reasoning, in
	// StreamEvent.Reasoning: its Text, or (Text empty) the provider's
	// Signature over the reasoning so far or a Redacted (encrypted) block.
	StreamEventReasoning StreamEventType = "reasoning"
	// StreamEventToolCall is a fragment of a tool call, in
	// StreamEvent.ToolCall: the fragments of one Index joined are that
	// call's arguments as JSON text; its ID and Name come on its first
	// fragment only.
	StreamEventToolCall StreamEventType = "tool_call"
	// StreamEventDone ends the stream, with the final task in StreamEvent.Task.
	StreamEventDone StreamEventType = "done"
)

// StreamEvent is one event of a task's stream: a delta of text, a piece of
// reasoning, a fragment of a tool call, or, last, the finished task.
type StreamEvent struct {
	// Type is StreamEventDelta, StreamEventReasoning, StreamEventToolCall or
	// StreamEventDone.
	Type StreamEventType
	// Text is the delta's text (delta events only; a reasoning event's text
	// is in Reasoning, so that Text joined is the output text alone).
	Text string
	// Reasoning is the reasoning event's data (reasoning events only).
	Reasoning *StreamReasoning
	// ToolCall is the tool_call event's data (tool_call events only).
	ToolCall *StreamToolCall
	// Task is the final task (the done event only).
	Task *Task
}

// maxEventBytes bounds one line of the stream, so that a broken server
// cannot make the client buffer without end.
const maxEventBytes = 64 << 20

// Stream follows a task's output as it is generated (GET /tasks/{id}/stream):
// it yields, in the order the provider generated them, a StreamEventDelta
// for each piece of text, a StreamEventReasoning for each piece of the
// model's reasoning (or its signature, or a redacted block) and a
// StreamEventToolCall for each fragment of a tool call, then one
// StreamEventDone with the final task, and ends. The deltas joined are the
// task's whole output text, the reasoning texts joined its reasoning, and
// the tool-call fragments of each index joined that call's arguments as
// JSON text. Tasks of kinds other than chat yield only the done event, when
// they end.
//
//	for ev, err := range c.Tasks.Stream(ctx, id) {
//		if err != nil { … }
//		if ev.Type == taskgate.StreamEventDelta { fmt.Print(ev.Text) }
//	}
//
// An error ends the sequence; a stream broken off after it began is not
// resumed (that would repeat text), so it ends with a *ConnectionError.
// Breaking out of the loop closes the connection.
func (s *TasksService) Stream(ctx context.Context, id string) iter.Seq2[StreamEvent, error] {
	return func(yield func(StreamEvent, error) bool) {
		resp, err := s.c.send(ctx, request{
			method:    http.MethodGet,
			path:      "/tasks/" + pathEscape(id) + "/stream",
			retryable: true,
			stream:    true,
		})
		if err != nil {
			yield(StreamEvent{}, err)
			return
		}
		defer func() {
			resp.stream.Close()
			resp.stop()
		}()
		done := false
		err = readSSE(resp.stream, resp.touch, func(event, data string) bool {
			ev, ok, err := decodeStreamEvent(event, data)
			if err != nil {
				yield(StreamEvent{}, err)
				return false
			}
			if !ok {
				return true // an event this version does not know
			}
			done = ev.Type == StreamEventDone
			return yield(ev, nil) && !done
		})
		switch {
		case done:
		case err == errStopped:
			// The consumer stopped, or an event was unreadable (already yielded).
		case ctx.Err() != nil:
			yield(StreamEvent{}, ctx.Err())
		case err != nil:
			yield(StreamEvent{}, &ConnectionError{Err: err, Timeout: resp.timedOut()})
		default:
			yield(StreamEvent{}, &ConnectionError{Err: io.ErrUnexpectedEOF})
		}
	}
}

// StreamText follows the task's stream to its end and returns the whole
// generated text and the final task. The text is the deltas joined; a task
// that had already ended when the stream was opened sends no delta (its
// stream is the done event alone), so its output's "text" is returned
// instead: the text is complete either way. Reasoning and tool-call events
// are passed over (they are in the final task's output).
func (s *TasksService) StreamText(ctx context.Context, id string) (string, *Task, error) {
	var b strings.Builder
	deltas := 0
	for ev, err := range s.Stream(ctx, id) {
		if err != nil {
			return b.String(), nil, err
		}
		switch ev.Type {
		case StreamEventDelta:
			deltas++
			b.WriteString(ev.Text)
		case StreamEventDone:
			if deltas == 0 && ev.Task != nil {
				if text, ok := ev.Task.Output["text"].(string); ok {
					return text, ev.Task, nil
				}
			}
			return b.String(), ev.Task, nil
		}
	}
	return b.String(), nil, &ConnectionError{Err: io.ErrUnexpectedEOF}
}

func decodeStreamEvent(event, data string) (StreamEvent, bool, error) {
	switch StreamEventType(event) {
	case StreamEventDelta:
		var d struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal([]byte(data), &d); err != nil {
			return StreamEvent{}, false, fmt.Errorf("taskgate: unreadable delta event: %w", err)
		}
		return StreamEvent{Type: StreamEventDelta, Text: d.Text}, true, nil
	case StreamEventReasoning:
		var r StreamReasoning
		if err := json.Unmarshal([]byte(data), &r); err != nil {
			return StreamEvent{}, false, fmt.Errorf("taskgate: unreadable reasoning event: %w", err)
		}
		return StreamEvent{Type: StreamEventReasoning, Reasoning: &r}, true, nil
	case StreamEventToolCall:
		var tc StreamToolCall
		if err := json.Unmarshal([]byte(data), &tc); err != nil {
			return StreamEvent{}, false, fmt.Errorf("taskgate: unreadable tool_call event: %w", err)
		}
		return StreamEvent{Type: StreamEventToolCall, ToolCall: &tc}, true, nil
	case StreamEventDone:
		var t Task
		if err := json.Unmarshal([]byte(data), &t); err != nil {
			return StreamEvent{}, false, fmt.Errorf("taskgate: unreadable done event: %w", err)
		}
		return StreamEvent{Type: StreamEventDone, Task: &t}, true, nil
	}
	return StreamEvent{}, false, nil
}

// errStopped is readSSE's answer when its handler asked it to stop.
var errStopped = errors.New("stopped")

// readSSE parses a text/event-stream body as the HTML standard says: lines
// end in LF, CRLF or CR; `field: value` lines (one space after the colon is
// dropped); data lines of one event are joined with LF; a blank line
// dispatches the event (type "message" when no event field); lines that
// start with a colon are comments. touch is called on every line (progress
// for the idle timer). It returns nil at the end of the body, errStopped
// when handle returns false, or the read error.
func readSSE(r io.Reader, touch func(), handle func(event, data string) bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxEventBytes)
	sc.Split(scanSSELines)
	var event string
	var data strings.Builder
	hasData := false
	for sc.Scan() {
		if touch != nil {
			touch()
		}
		line := sc.Text()
		if line == "" {
			if hasData {
				ev := event
				if ev == "" {
					ev = "message"
				}
				if !handle(ev, data.String()) {
					return errStopped
				}
			}
			event, hasData = "", false
			data.Reset()
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			event = value
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.WriteString(value)
			hasData = true
		}
		// id and retry matter for EventSource's reconnection only.
	}
	return sc.Err()
}

// scanSSELines is a bufio.SplitFunc for lines ending in LF, CRLF or CR.
func scanSSELines(data []byte, atEOF bool) (advance int, token []byte, err error) {
	if atEOF && len(data) == 0 {
		return 0, nil, nil
	}
	if i := bytes.IndexAny(data, "\r\n"); i >= 0 {
		if data[i] == '\n' {
			return i + 1, data[:i], nil
		}
		// A CR: part of a CRLF when an LF follows; wait for the next byte.
		if i+1 < len(data) {
			if data[i+1] == '\n' {
				return i + 2, data[:i], nil
			}
			return i + 1, data[:i], nil
		}
		if atEOF {
			return i + 1, data[:i], nil
		}
		return 0, nil, nil
	}
	if atEOF {
		// A last line without its end: no event can follow it.
		return len(data), data, nil
	}
	return 0, nil, nil
}
