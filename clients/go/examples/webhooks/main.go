// Command webhooks receives Taskgate's webhooks: it verifies each delivery
// with the endpoint's secret and logs its event.
//
//	TASKGATE_WEBHOOK_SECRET=whsec_… go run ./examples/webhooks
package main

import (
	"io"
	"log"
	"net/http"
	"os"

	taskgate "github.com/taskgate/taskgate/clients/go"
)

func main() {
	secret := os.Getenv("TASKGATE_WEBHOOK_SECRET")
	http.HandleFunc("POST /taskgate/webhooks", func(w http.ResponseWriter, r *http.Request) {
		// The raw body, exactly as it arrived: the signature is over these bytes.
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
			return
		}
		event, err := taskgate.VerifyWebhook(body, r.Header, secret)
		if err != nil { // wraps taskgate.ErrWebhookVerification
			log.Print(err)
			http.Error(w, "invalid webhook", http.StatusBadRequest)
			return
		}
		switch event.Type {
		case taskgate.WebhookTaskSucceeded, taskgate.WebhookTaskFailed, taskgate.WebhookTaskCancelled:
			task, err := event.Task()
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			// event.MessageID is the same on every retry: skip ids already handled.
			log.Printf("%s %s: %s (output omitted: %v)", event.MessageID, task.ID, task.Status, task.OutputOmitted)
		default:
			log.Printf("%s: %s", event.MessageID, event.Type)
		}
		w.WriteHeader(http.StatusNoContent) // any 2xx; answer quickly
	})
	log.Fatal(http.ListenAndServe("127.0.0.1:8000", nil))
}
