"""The official `anthropic` Python package against Taskgate's /anthropic/v1.

Run through scripts/with-server.sh (it provides the server and the keys):
    scripts/with-server.sh python -m unittest e2e/anthropic_sdk_test.py
"""

import json
import os
import unittest
import urllib.request

import anthropic

SERVER = os.environ["TASKGATE_SERVER_URL"]
# What ANTHROPIC_BASE_URL is set to: the SDK adds /v1/messages.
BASE = SERVER + "/anthropic"
LIVE = os.environ["TASKGATE_API_KEY"]
TEST = os.environ["TASKGATE_TEST_KEY"]
# The fake upstream's fixed reply (crates/taskgate-providers/examples/fake_openai.rs).
REPLY = "Hello! How can I help you today?"
MESSAGES = [{"role": "user", "content": "Say hello."}]
WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


def client(key=LIVE, **kw):
    return anthropic.Anthropic(api_key=key, base_url=BASE, **kw)


def task(task_id, key=LIVE):
    """The task as Taskgate's own API shows it."""
    request = urllib.request.Request(
        f"{SERVER}/api/v1/tasks/{task_id}", headers={"Authorization": f"Bearer {key}"}
    )
    with urllib.request.urlopen(request) as r:
        return json.load(r)["data"]


class AnthropicSDK(unittest.TestCase):
    def test_a_message_is_a_task(self):
        raw = client().messages.with_raw_response.create(
            model="chat", max_tokens=100, system="Be brief.", messages=MESSAGES
        )
        message = raw.parse()
        self.assertEqual(message.content[0].text, REPLY)
        self.assertEqual(message.stop_reason, "end_turn")
        self.assertEqual(message.model, "chat")
        task_id = raw.headers["x-taskgate-task-id"]
        self.assertEqual(message.id, "msg_" + task_id.removeprefix("task_"))
        stored = task(task_id)
        self.assertEqual(stored["status"], "succeeded")
        self.assertEqual(stored["output"]["text"], REPLY)
        self.assertEqual(message.usage.input_tokens, stored["usage"]["input_tokens"])

    def test_streamed_message(self):
        with client().messages.stream(model="chat", max_tokens=100, messages=MESSAGES) as stream:
            self.assertEqual(stream.get_final_text(), REPLY)
            self.assertEqual(stream.get_final_message().stop_reason, "end_turn")

    def test_a_tool_use_round_trip(self):
        # A test key's sandbox calls the forced tool with arguments made
        # from its schema, then answers the tool's result with text.
        messages = [{"role": "user", "content": "Weather in Paris?"}]
        first = client(TEST).messages.create(
            model="chat",
            max_tokens=200,
            messages=messages,
            tools=[WEATHER],
            tool_choice={"type": "tool", "name": "get_weather"},
        )
        self.assertEqual(first.stop_reason, "tool_use")
        use = [b for b in first.content if b.type == "tool_use"][0]
        self.assertEqual(use.name, "get_weather")
        self.assertIsInstance(use.input["city"], str)
        messages += [
            {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "sunny"}],
            },
        ]
        second = client(TEST).messages.create(
            model="chat", max_tokens=200, messages=messages, tools=[WEATHER]
        )
        self.assertEqual(second.stop_reason, "end_turn")
        self.assertEqual(second.content[0].type, "text")
        self.assertTrue(second.content[0].text)

    def test_a_streamed_tool_use(self):
        with client(TEST).messages.stream(
            model="chat",
            max_tokens=200,
            messages=[{"role": "user", "content": "Weather in Paris?"}],
            tools=[WEATHER],
            tool_choice={"type": "tool", "name": "get_weather"},
        ) as stream:
            message = stream.get_final_message()
        self.assertEqual(message.stop_reason, "tool_use")
        use = [b for b in message.content if b.type == "tool_use"][0]
        self.assertEqual(use.name, "get_weather")
        self.assertIsInstance(use.input["city"], str)

    def test_errors_are_the_sdks_exceptions(self):
        with self.assertRaises(anthropic.AuthenticationError) as caught:
            client("tg_live_" + "x" * 40, max_retries=0).messages.create(
                model="chat", max_tokens=10, messages=MESSAGES
            )
        self.assertEqual(caught.exception.body["error"]["type"], "authentication_error")
        with self.assertRaises(anthropic.NotFoundError):
            client().messages.create(model="no-such-model", max_tokens=10, messages=MESSAGES)
        with self.assertRaises(anthropic.BadRequestError) as caught:
            client().messages.create(
                model="chat", max_tokens=10, messages=MESSAGES, extra_body={"top_k": 5}
            )
        self.assertIn("top_k", caught.exception.body["error"]["message"])


if __name__ == "__main__":
    unittest.main()
