// Package taskgate is the official Go client of Taskgate, the self-hosted
// service that gives applications one REST interface to many AI services.
//
// Create a client, make a call, wait for it and list tasks:
//
//	c := taskgate.NewClient(key, taskgate.WithBaseURL(u))
//	t, err := c.Call(ctx, taskgate.CallParams{API: "sentiment", Input: map[string]any{"text": "hi"}})
//	t, err = c.Tasks.Wait(ctx, t.ID) // the context bounds the wait
//	for t, err := range c.Tasks.List(ctx, taskgate.TaskListParams{Limit: 10}) { … }
//
// The wire types (Task, TaskDetails, API, …) are generated from the service's
// OpenAPI document into types_gen.go; regenerate them with `go generate ./...`.
// Everything else (requests, retries, errors, pagination, streaming) is the
// small hand-written layer in this package. It uses the standard library only.
package taskgate

//go:generate go run ./internal/generate -in ../openapi.json -out types_gen.go
