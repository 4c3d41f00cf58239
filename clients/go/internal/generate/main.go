// Command generate writes the package's wire types (types_gen.go) from the
// service's OpenAPI document (../openapi.json), using the standard library
// only. It is run by `go generate ./...` in clients/go.
//
// Only the schemas the client needs are generated: they are listed below,
// each with its Go name. The output is sorted and gofmt'ed, and depends on
// nothing but the document, so running it again gives the same bytes.
//
// A `oneOf` of objects (a chat message, whatever its role) becomes one
// struct with every alternative's fields, required where all require them;
// a field whose schemas differ between them is a string when they are all
// string constants (`role`), else `any`. An optional boolean, number or
// struct is a pointer, so that false and 0 are sent and a struct left out.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/format"
	"os"
	"sort"
	"strings"
)

// structSpec names a component schema to generate as a struct.
type structSpec struct {
	schema string // the component's name under #/components/schemas
	name   string // the Go type's name
	doc    string // the Go doc comment, after the type's name
}

// enumSpec names a schema with an `enum` to generate as a string type with
// one constant per value.
type enumSpec struct {
	pointer string // JSON pointer to the schema in the document
	name    string // the Go type's name
	doc     string // the Go doc comment, after the type's name
}

var structs = []structSpec{
	{"Task", "Task", "is a task: one call of an API, its status, output, error and usage."},
	{"TaskDetails", "TaskDetails", "is a task with its input and history (GET /tasks/{id}): the Task's fields plus input, key, idempotency key, events and attempts."},
	{"TaskError", "TaskError", "is why a task failed."},
	{"Usage", "Usage", "is what a task used and cost."},
	{"Event", "TaskEvent", "is one status change of a task."},
	{"Attempt", "Attempt", "is one attempt of a task at an upstream provider (or the built-in or sandbox one)."},
	{"TaskList", "TaskList", "is one page of tasks (GET /tasks)."},
	{"ApiSummary", "API", "is an API of the catalog, as GET /apis lists it."},
	{"ApiDetails", "APIDetails", "is one API of the catalog with its schemas, examples and limits (GET /apis/{slug})."},
	{"ApiList", "APIList", "is one page of the catalog (GET /apis)."},
	{"Pricing", "Pricing", "is an API's price."},
	{"Limits", "Limits", "are an API's limits on a call."},
	{"Example", "Example", "is an example input of an API with its output."},
	{"ErrorEnvelope", "ErrorEnvelope", "is the body of every error answer."},
	{"Error", "ErrorBody", "is the `error` member of an ErrorEnvelope."},
	{"Meta", "Meta", "is the `meta` member of every answer."},
	{"Sandbox", "Sandbox", "controls the simulated outcome of a test-mode call (test keys only)."},
	{"ChatInput", "ChatInput", "is the input of an API of kind chat: pass it as CallParams.Input."},
	{"ChatMessage", "ChatMessage", "is a message of a chat conversation; Role says which fields it has: system, user (text, images, documents), assistant (text, tool calls) or tool (a tool's result)."},
	{"ChatContentPart", "ChatContentPart", "is a part of a message's content: text, an image or a document, told apart by Type."},
	{"ChatTool", "ChatTool", "is a tool (function) a chat model may call."},
	{"ChatToolCall", "ChatToolCall", "is a call of a tool by a chat model: answer it with a tool message naming its ID."},
	{"ChatResponseFormat", "ChatResponseFormat", "is the form of a chat reply: text, a JSON object, or JSON valid for a schema."},
	{"ChatReasoning", "ChatReasoning", "lets a chat model reason before answering: an Effort or a budget of MaxTokens."},
	{"ChatOutput", "ChatOutput", "is the output of a task of an API of kind chat: read it with Task.DecodeOutput."},
	{"ChatReasoningDetail", "ChatReasoningDetail", "is the provider's own record of a piece of a chat model's reasoning: send it back unchanged in the assistant message that repeats the reply."},
	{"StreamToolCall", "StreamToolCall", "is the data of a tool_call stream event: a fragment of a tool call of a chat task."},
	{"WebhookEndpoint", "WebhookEndpoint", "is where the key's account and mode gets its tasks' events (Client.WebhookEndpoints); Secret is set only when it is created."},
	{"WebhookEndpointList", "WebhookEndpointList", "is one page of webhook endpoints (GET /webhook_endpoints), oldest first."},
	{"WebhookDelivery", "WebhookDelivery", "is one event's delivery to an endpoint or a call's own webhook, with its attempts (Client.WebhookDeliveries)."},
	{"WebhookDeliveryAttempt", "WebhookDeliveryAttempt", "is one attempt at a webhook delivery."},
	{"WebhookDeliveryList", "WebhookDeliveryList", "is one page of the webhook delivery log (GET /webhook_deliveries), newest first."},
	{"StreamReasoning", "StreamReasoning", "is the data of a reasoning stream event: a piece of a chat task's reasoning, or (Text empty) the provider's Signature over it or a Redacted block."},
}

var enums = []enumSpec{
	{"/components/schemas/Status", "TaskStatus", "is the status of a task. Terminal statuses (succeeded, failed, cancelled) never change again."},
	{"/components/schemas/sentiment.call/properties/mode", "Mode", "is how POST /call answers: sync waits for the task, async answers at once."},
	{"/components/schemas/Sandbox/properties/outcome", "SandboxOutcome", "is the simulated outcome of a test-mode call."},
	{"/components/schemas/Sandbox/properties/error_code", "SandboxErrorCode", "is the error code of a test-mode call simulated to fail."},
	{"/paths/~1api~1v1~1tasks/get/parameters/name=page/schema/properties/order", "Order", "is the order of a task listing, by creation time."},
	{"/components/schemas/WebhookEventType", "WebhookEventName", "is an event a webhook endpoint can subscribe to."},
	{"/components/schemas/WebhookDeliveryStatus", "WebhookDeliveryStatus", "is the status of a webhook delivery."},
	{"/components/schemas/WebhookDisabledReason", "WebhookDisabledReason", "is why a webhook endpoint is disabled."},
	{"/components/schemas/ChatOutput/properties/finish_reason", "ChatFinishReason", "is why a chat model stopped."},
	{"/components/schemas/ChatReasoning/oneOf/0/properties/effort", "ChatEffort", "is how much a chat model reasons."},
}

// fieldTypes overrides the Go type of a few fields: RFC 3339 timestamps that
// the document types as plain strings, and metadata, whose values are
// always strings.
var fieldTypes = map[string]string{
	"Task.created_at":                 "time.Time",
	"Task.started_at":                 "time.Time",
	"Task.completed_at":               "time.Time",
	"Task.metadata":                   "map[string]string",
	"Event.at":                        "time.Time",
	"Attempt.started_at":              "time.Time",
	"WebhookEndpoint.created_at":      "time.Time",
	"WebhookDelivery.created_at":      "time.Time",
	"WebhookDelivery.next_attempt_at": "time.Time",
	"WebhookDeliveryAttempt.at":       "time.Time",
}

// fieldDocs documents the fields that the document leaves without a
// description. A field in neither gets a plain comment naming its JSON name.
var fieldDocs = map[string]string{
	"Task.id":                     "The task's id, `task_…`.",
	"Task.object":                 "Always `task`.",
	"Task.created_at":             "When the task was created.",
	"Task.started_at":             "When the task started running; nil while it is queued.",
	"Task.completed_at":           "When the task ended; nil until then.",
	"Task.duration_ms":            "How long the execution took, in milliseconds; nil until the task ends.",
	"Task.error":                  "Why the task failed; nil unless it failed.",
	"Task.metadata":               "Your own labels, as given to the call.",
	"Task.status":                 "The task's status.",
	"Task.usage":                  "What the task used and cost.",
	"TaskDetails.attempts":        "Every attempt at a provider, in order.",
	"TaskDetails.events":          "Every status change, the first `queued` at CreatedAt.",
	"TaskDetails.idempotency_key": "The Idempotency-Key of the call that made the task, if there was one.",
	"TaskDetails.input":           "The input the task was called with.",
	"TaskDetails.key_id":          "The id of the API key that made the task, `key_…`.",
	"TaskError.message":           "What went wrong.",
	"TaskError.upstream_status":   "The upstream's HTTP status, when it answered.",
	"Event.at":                    "When the task entered the status.",
	"Event.message":               "Why, where the service says.",
	"Event.status":                "The status entered.",
	"Attempt.duration_ms":         "How long the attempt took, in milliseconds.",
	"Attempt.http_status":         "The upstream's HTTP status, when it answered.",
	"Attempt.outcome":             "`succeeded`, `failed`, `timeout` or `cancelled`.",
	"Attempt.started_at":          "When the attempt started.",
	"Attempt.target":              "What was called: the provider's model or address.",
	"TaskList.has_more":           "Whether another page follows.",
	"TaskList.items":              "The page's tasks, without their output.",
	"TaskList.object":             "Always `list`.",
	"ApiList.has_more":            "Whether another page follows.",
	"ApiList.items":               "The page's APIs.",
	"ApiList.next_cursor":         "Pass as `cursor` for the next page.",
	"ApiList.object":              "Always `list`.",
	"ApiSummary.description":      "What the API does.",
	"ApiSummary.modes":            "The call modes the API supports: `sync`, `async`.",
	"ApiSummary.name":             "The API's display name.",
	"ApiSummary.object":           "Always `api`.",
	"ApiSummary.pricing":          "The API's price.",
	"ApiSummary.provider":         "The provider that serves the API, e.g. `builtin`.",
	"ApiSummary.slug":             "The API's slug: its name in calls.",
	"ApiDetails.examples":         "Example inputs with their outputs.",
	"ApiDetails.input_schema":     "The JSON Schema of the API's input.",
	"ApiDetails.limits":           "The API's limits on a call.",
	"ApiDetails.output_schema":    "The JSON Schema of the API's output.",
	"Error.code":                  "The machine-readable reason, e.g. `task_not_found`.",
	"Error.details":               "Details where they help, e.g. one `{path, message}` per invalid input field.",
	"Error.message":               "The human-readable explanation.",
	"Error.param":                 "The request field or parameter at fault, when there is one.",
	"ErrorEnvelope.data":          "Always null in an error answer.",
	"ErrorEnvelope.error":         "The error.",
	"ErrorEnvelope.meta":          "The request's id and latency.",
	"ErrorEnvelope.success":       "Always false in an error answer.",
	"Example.input":               "An input.",
	"Example.output":              "Its output.",
	"Limits.max_input_bytes":      "The largest input, as JSON, in bytes.",
	"Limits.timeout_ms":           "The longest (and the default) `timeout_ms` of a call.",
	"Pricing.input_price_usd":     "The price of 1K input tokens in USD, a decimal string (unit `1k_tokens`).",
	"Pricing.output_price_usd":    "The price of 1K output tokens in USD, a decimal string (unit `1k_tokens`).",
	"Pricing.price_usd":           "The price of a call in USD, a decimal string (unit `call`).",
	"Sandbox.delay_ms":            "Delays the outcome by this many milliseconds (0 to 600000).",
	"Sandbox.outcome":             "The simulated outcome; succeeded when empty.",
	"Usage.input_tokens":          "Input tokens, where the API counts them.",
	"Usage.output_tokens":         "Output tokens, where the API counts them.",
	"Usage.units":                 "Units billed: one per call, or one per image.",
	"ChatMessage.content":         "A string, or parts ([]ChatContentPart; images and documents in user messages only). Required but in assistant messages with tool calls.",
	"ChatMessage.role":            "`system`, `user`, `assistant` or `tool`.",
	"ChatMessage.tool_call_id":    "In a tool message: the ID of the ChatToolCall it answers.",
	"ChatContentPart.type":        "`text`, `image` or `document`.",
	"ChatContentPart.text":        "The text of a `text` part.",
	"ChatContentPart.url":         "Where an image or document is (or Data and MediaType).",
	"ChatContentPart.data":        "An image or document inline, base64.",
	"ChatContentPart.media_type":  "The type of an image or document, e.g. `image/png`, `application/pdf`.",
	"ChatTool.name":               "The tool's name, as the model calls it.",
	"ChatResponseFormat.type":     "`text`, `json_object` or `json_schema`.",
	"ChatReasoning.max_tokens":    "A budget of reasoning tokens.",
	"ChatInput.temperature":       "Sampling temperature, 0 to 2.",
	"ChatInput.top_p":             "Nucleus sampling, 0 to 1.",
	"ChatInput.stop":              "Up to 4 sequences that end the reply.",
	"StreamToolCall.index":        "Which tool call of the output the fragment belongs to.",
	"ChatMessage.tool_calls":      "In an assistant message: the tool calls it made (a ChatOutput's ToolCalls).",
	"ChatToolCall.name":           "The name of the tool called.",
	"ChatInput.tool_choice":       "Whether and which tool the model calls: \"auto\" (the default), \"none\", \"required\", or map[string]any{\"name\": …} for that tool.",
	"ChatInput.reasoning":         "Lets the model reason before answering.",
	"ChatInput.response_format":   "The reply's form; the parsed reply is ChatOutput.JSON.",
	"ChatReasoning.effort":        "How much to reason: low, medium or high.",
}

func main() {
	in := flag.String("in", "../openapi.json", "the OpenAPI document")
	out := flag.String("out", "types_gen.go", "the Go file to write")
	flag.Parse()
	if err := run(*in, *out); err != nil {
		fmt.Fprintln(os.Stderr, "generate:", err)
		os.Exit(1)
	}
}

func run(in, out string) error {
	data, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	doc, err := parseJSON(data)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	src, err := generate(doc, in)
	if err != nil {
		return err
	}
	return os.WriteFile(out, src, 0o644)
}

// generator holds what the document's schemas are called in Go.
type generator struct {
	doc       *node
	byPointer map[string]string // JSON pointer of a schema -> Go type name
	usesTime  bool
}

func generate(doc *node, in string) ([]byte, error) {
	g := &generator{doc: doc, byPointer: map[string]string{}}
	for _, s := range structs {
		g.byPointer["/components/schemas/"+s.schema] = s.name
	}
	for _, e := range enums {
		g.byPointer[e.pointer] = e.name
	}

	type decl struct {
		name string
		src  string
	}
	var decls []decl
	for _, s := range structs {
		src, err := g.structDecl(s)
		if err != nil {
			return nil, fmt.Errorf("schema %s: %w", s.schema, err)
		}
		decls = append(decls, decl{s.name, src})
	}
	for _, e := range enums {
		src, err := g.enumDecl(e)
		if err != nil {
			return nil, fmt.Errorf("enum %s: %w", e.name, err)
		}
		decls = append(decls, decl{e.name, src})
	}
	sort.Slice(decls, func(i, j int) bool { return decls[i].name < decls[j].name })

	var b bytes.Buffer
	fmt.Fprintf(&b, "// Code generated by internal/generate from %s; DO NOT EDIT.\n\n", in)
	b.WriteString("package taskgate\n\n")
	if g.usesTime {
		b.WriteString("import \"time\"\n\n")
	}
	for _, d := range decls {
		b.WriteString(d.src)
		b.WriteString("\n")
	}
	src, err := format.Source(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("generated code does not parse: %w\n%s", err, b.Bytes())
	}
	return src, nil
}

func (g *generator) structDecl(s structSpec) (string, error) {
	ptr := "/components/schemas/" + s.schema
	schema, err := g.doc.lookup(ptr)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	writeComment(&b, "", s.name+" "+s.doc+" (Schema `"+s.schema+"`.)")
	fmt.Fprintf(&b, "type %s struct {\n", s.name)
	if alts, err := g.alternatives(schema, ptr); err != nil {
		return "", err
	} else if alts != nil {
		err = g.mergedFields(&b, s.schema, alts)
		if err != nil {
			return "", err
		}
	} else if err := g.fields(&b, s.schema, schema, ptr); err != nil {
		return "", err
	}
	b.WriteString("}\n")
	return b.String(), nil
}

// isStruct reports whether typ is one of the generated structs.
func (g *generator) isStruct(typ string) bool {
	for _, s := range structs {
		if s.name == typ {
			return true
		}
	}
	return false
}

// alternative is one object schema of a oneOf, with its JSON pointer.
type alternative struct {
	schema *node
	ptr    string
}

// alternatives returns the object schemas of a oneOf without properties of
// its own (references followed), or nil for any other schema.
func (g *generator) alternatives(schema *node, ptr string) ([]alternative, error) {
	one := schema.get("oneOf")
	if one == nil || schema.get("properties") != nil {
		return nil, nil
	}
	var out []alternative
	for i, a := range one.items {
		alt := alternative{a, fmt.Sprintf("%s/oneOf/%d", ptr, i)}
		if ref := a.get("$ref").str(); ref != "" {
			target, err := g.doc.lookup(strings.TrimPrefix(ref, "#"))
			if err != nil {
				return nil, err
			}
			alt = alternative{target, strings.TrimPrefix(ref, "#")}
		}
		if alt.schema.get("properties") == nil {
			return nil, nil
		}
		out = append(out, alt)
	}
	return out, nil
}

// mergedFields writes one struct's fields for the alternatives of a oneOf.
func (g *generator) mergedFields(b *strings.Builder, schemaName string, alts []alternative) error {
	type field struct {
		schemas  []*node
		ptrs     []string
		required int
	}
	var order []string
	found := map[string]*field{}
	for _, alt := range alts {
		required := map[string]bool{}
		for _, r := range alt.schema.get("required").strings() {
			required[r] = true
		}
		props := alt.schema.get("properties")
		for _, name := range props.keys {
			f, ok := found[name]
			if !ok {
				f = &field{}
				found[name] = f
				order = append(order, name)
			}
			f.schemas = append(f.schemas, props.fields[name])
			f.ptrs = append(f.ptrs, alt.ptr+"/properties/"+escapePointer(name))
			if required[name] {
				f.required++
			}
		}
	}
	for _, name := range order {
		f := found[name]
		same := true
		for _, s := range f.schemas[1:] {
			same = same && equal(s, f.schemas[0])
		}
		var typ string
		var nullable bool
		var err error
		switch {
		case same:
			typ, nullable, err = g.goType(f.schemas[0], f.ptrs[0])
		case allStrings(f.schemas):
			typ = "string"
		default:
			typ = "any"
		}
		if err != nil {
			return fmt.Errorf("property %s: %w", name, err)
		}
		doc := ""
		for _, s := range f.schemas {
			if doc == "" {
				doc = description(s)
			}
		}
		g.writeField(b, schemaName, name, typ, nullable, f.required == len(alts), doc)
	}
	return nil
}

// allStrings reports whether every schema is a string constant or enum.
func allStrings(schemas []*node) bool {
	for _, s := range schemas {
		if s.get("const").str() == "" && !(s.get("type").str() == "string" && s.get("enum") != nil) {
			return false
		}
	}
	return true
}

// fields writes the fields of an object schema; an allOf member that is a
// reference to another generated struct is embedded.
func (g *generator) fields(b *strings.Builder, schemaName string, schema *node, ptr string) error {
	if all := schema.get("allOf"); all != nil {
		for i, part := range all.items {
			partPtr := fmt.Sprintf("%s/allOf/%d", ptr, i)
			if ref := part.get("$ref").str(); ref != "" {
				name, ok := g.byPointer[strings.TrimPrefix(ref, "#")]
				if !ok {
					return fmt.Errorf("%s refers to %s, which is not in the generator's list", partPtr, ref)
				}
				fmt.Fprintf(b, "\t%s\n", name)
				continue
			}
			if err := g.fields(b, schemaName, part, partPtr); err != nil {
				return err
			}
		}
	}
	props := schema.get("properties")
	if props == nil {
		return nil
	}
	required := map[string]bool{}
	for _, r := range schema.get("required").strings() {
		required[r] = true
	}
	for _, name := range props.keys {
		prop := props.fields[name]
		propPtr := ptr + "/properties/" + escapePointer(name)
		typ, nullable, err := g.goType(prop, propPtr)
		if err != nil {
			return fmt.Errorf("property %s: %w", name, err)
		}
		g.writeField(b, schemaName, name, typ, nullable, required[name], description(prop))
	}
	return nil
}

// writeField writes one field of a struct, its doc comment first.
func (g *generator) writeField(b *strings.Builder, schemaName, name, typ string, nullable, required bool, doc string) {
	if t, ok := fieldTypes[schemaName+"."+name]; ok {
		typ = t
	}
	// An optional false or 0 must be sent, and an optional struct left out:
	// only a nil pointer is.
	if !required && (typ == "bool" || typ == "float64" || g.isStruct(typ)) {
		nullable = true
	}
	if nullable && !strings.HasPrefix(typ, "[]") && !strings.HasPrefix(typ, "map[") && typ != "any" {
		typ = "*" + typ
	}
	if strings.Contains(typ, "time.") {
		g.usesTime = true
	}
	tag := name
	if !required {
		tag += ",omitempty"
	}
	if doc == "" {
		doc = fieldDocs[schemaName+"."+name]
	}
	if doc == "" {
		doc = "The `" + name + "` field."
	}
	writeComment(b, "\t", doc)
	fmt.Fprintf(b, "\t%s %s `json:\"%s\"`\n", goName(name), typ, tag)
}

// goType returns the Go type of a schema and whether it may be null.
func (g *generator) goType(schema *node, ptr string) (string, bool, error) {
	if name, ok := g.byPointer[ptr]; ok {
		return name, isNullable(schema), nil
	}
	if ref := schema.get("$ref").str(); ref != "" {
		target := strings.TrimPrefix(ref, "#")
		if name, ok := g.byPointer[target]; ok {
			return name, false, nil
		}
		// A schema outside the list is its plain Go type, unless it is a
		// struct of its own, which must be listed.
		if t, err := g.doc.lookup(target); err == nil && t.get("properties") == nil {
			if alts, _ := g.alternatives(t, target); alts == nil {
				return g.goType(t, target)
			}
		}
		return "", false, fmt.Errorf("%s refers to %s, which is not in the generator's list", ptr, ref)
	}
	for _, k := range []string{"oneOf", "anyOf"} {
		alts := schema.get(k)
		if alts == nil {
			continue
		}
		var other []int
		nullable := false
		for i, a := range alts.items {
			if types := a.get("type").strings(); len(types) == 1 && types[0] == "null" {
				nullable = true
			} else {
				other = append(other, i)
			}
		}
		if len(other) == 1 {
			typ, _, err := g.goType(alts.items[other[0]], fmt.Sprintf("%s/%s/%d", ptr, k, other[0]))
			return typ, nullable, err
		}
		return "any", nullable, nil
	}
	var base string
	nullable := false
	for _, t := range schema.get("type").strings() {
		if t == "null" {
			nullable = true
		} else if base == "" {
			base = t
		} else {
			return "any", nullable, nil // several types: nothing better
		}
	}
	if base == "" && schema.get("const").str() != "" {
		base = "string"
	}
	switch base {
	case "string":
		if schema.get("format").str() == "date-time" {
			return "time.Time", nullable, nil
		}
		return "string", nullable, nil
	case "integer":
		switch schema.get("format").str() {
		case "int64", "uint64":
			return "int64", nullable, nil
		}
		return "int", nullable, nil
	case "number":
		return "float64", nullable, nil
	case "boolean":
		return "bool", nullable, nil
	case "array":
		items := schema.get("items")
		if items == nil {
			return "[]any", nullable, nil
		}
		typ, itemNullable, err := g.goType(items, ptr+"/items")
		if itemNullable && typ != "any" {
			typ = "*" + typ
		}
		return "[]" + typ, nullable, err
	case "object":
		if ap := schema.get("additionalProperties"); ap != nil && ap.get("type").str() == "string" && schema.get("properties") == nil {
			return "map[string]string", nullable, nil
		}
		return "map[string]any", nullable, nil
	}
	return "any", nullable, nil
}

func isNullable(schema *node) bool {
	for _, t := range schema.get("type").strings() {
		if t == "null" {
			return true
		}
	}
	return false
}

func (g *generator) enumDecl(e enumSpec) (string, error) {
	schema, err := g.doc.lookup(e.pointer)
	if err != nil {
		return "", err
	}
	values := schema.get("enum").strings()
	if len(values) == 0 {
		return "", fmt.Errorf("%s has no string enum", e.pointer)
	}
	var b strings.Builder
	writeComment(&b, "", e.name+" "+e.doc)
	fmt.Fprintf(&b, "type %s string\n\n", e.name)
	fmt.Fprintf(&b, "// The values of %s.\nconst (\n", e.name)
	for _, v := range values {
		fmt.Fprintf(&b, "\t%s%s %s = %q\n", e.name, goName(v), e.name, v)
	}
	b.WriteString(")\n")
	return b.String(), nil
}

// description returns a schema's own description, or "".
func description(schema *node) string {
	return strings.TrimSpace(schema.get("description").str())
}

func writeComment(b *strings.Builder, indent, text string) {
	if text == "" {
		return
	}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimRight(line, " ")
		if line == "" {
			fmt.Fprintf(b, "%s//\n", indent)
		} else {
			fmt.Fprintf(b, "%s// %s\n", indent, line)
		}
	}
}

// initialisms are written in capitals in Go names, as Go's own style does.
var initialisms = map[string]string{
	"api": "API", "id": "ID", "ms": "MS", "usd": "USD", "url": "URL", "http": "HTTP", "json": "JSON",
}

// goName turns a JSON name (snake_case, kebab-case or lower case) into an
// exported Go name: duration_ms -> DurationMS, key_id -> KeyID.
func goName(s string) string {
	var b strings.Builder
	for _, part := range strings.FieldsFunc(s, func(r rune) bool { return r == '_' || r == '-' || r == ' ' || r == '.' }) {
		if up, ok := initialisms[strings.ToLower(part)]; ok {
			b.WriteString(up)
			continue
		}
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}

func escapePointer(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}
