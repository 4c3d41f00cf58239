"""The official `openai` Python package against Taskgate's /openai/v1.

Run through scripts/with-server.sh (it provides the server and the keys):
    scripts/with-server.sh python -m unittest e2e/openai_sdk_test.py
"""

import json
import os
import unittest
import urllib.request

import openai
import pydantic

SERVER = os.environ["TASKGATE_SERVER_URL"]
BASE = SERVER + "/openai/v1"
LIVE = os.environ["TASKGATE_API_KEY"]
TEST = os.environ["TASKGATE_TEST_KEY"]
LIMITED = os.environ["TASKGATE_LIMITED_KEY"]
RESTRICTED = os.environ["TASKGATE_RESTRICTED_KEY"]
# The fake upstream's fixed reply (crates/taskgate-providers/examples/fake_openai.rs).
REPLY = "Hello! How can I help you today?"
MESSAGES = [{"role": "user", "content": "Say hello."}]


def client(key=LIVE, **kw):
    return openai.OpenAI(api_key=key, base_url=BASE, **kw)


def task(task_id, key=LIVE):
    """The task as Taskgate's own API shows it."""
    request = urllib.request.Request(
        f"{SERVER}/api/v1/tasks/{task_id}", headers={"Authorization": f"Bearer {key}"}
    )
    with urllib.request.urlopen(request) as r:
        return json.load(r)["data"]


class OpenAISDK(unittest.TestCase):
    def test_models_lists_the_chat_and_embedding_apis(self):
        ids = sorted(m.id for m in client().models.list())
        self.assertEqual(ids, ["chat", "embed"])
        self.assertEqual(client().models.retrieve("chat").id, "chat")
        with self.assertRaises(openai.NotFoundError):
            client().models.retrieve("sentiment")

    def test_chat_is_a_task(self):
        raw = client().chat.completions.with_raw_response.create(model="chat", messages=MESSAGES)
        completion = raw.parse()
        self.assertEqual(completion.choices[0].message.content, REPLY)
        self.assertEqual(completion.choices[0].finish_reason, "stop")
        self.assertEqual(completion.model, "chat")
        self.assertEqual(completion.usage.prompt_tokens, 10)
        self.assertEqual(completion.usage.completion_tokens, 9)
        task_id = raw.headers["x-taskgate-task-id"]
        self.assertEqual(completion.id, task_id)
        stored = task(task_id)
        self.assertEqual(stored["status"], "succeeded")
        self.assertEqual(stored["mode"], "live")
        self.assertEqual(stored["output"]["text"], REPLY)

    def test_streamed_chat(self):
        stream = client().chat.completions.create(
            model="chat", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
        )
        text, finish, usage = "", None, None
        for chunk in stream:
            if chunk.choices:
                text += chunk.choices[0].delta.content or ""
                finish = chunk.choices[0].finish_reason or finish
            if chunk.usage:
                usage = chunk.usage
        self.assertEqual(text, REPLY)
        self.assertEqual(finish, "stop")
        self.assertEqual(usage.total_tokens, 19)

    def test_test_keys_get_sandbox_answers_word_by_word(self):
        # `sandbox` (test keys only, as in POST /call) goes as an extra field:
        # the simulated reply streams over the delay.
        stream = client(TEST).chat.completions.create(
            model="chat", messages=MESSAGES, stream=True, extra_body={"sandbox": {"delay_ms": 300}}
        )
        chunks = [c.choices[0].delta.content for c in stream if c.choices and c.choices[0].delta.content]
        self.assertGreater(len(chunks), 1)
        raw = client(TEST).chat.completions.with_raw_response.create(model="chat", messages=MESSAGES)
        stored = task(raw.headers["x-taskgate-task-id"], TEST)
        self.assertEqual(stored["mode"], "test")
        self.assertEqual(stored["usage"]["cost_usd"], "0.000000")
        self.assertEqual(raw.parse().choices[0].message.content, stored["output"]["text"])

    def test_a_tool_call_round_trip(self):
        # A test key's sandbox calls the forced tool with arguments made from
        # its schema, then answers the tool's result with text.
        tools = [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "The weather in a city",
                    "parameters": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                        "required": ["city"],
                    },
                },
            }
        ]
        messages = [{"role": "user", "content": "Weather in Paris?"}]
        first = client(TEST).chat.completions.create(
            model="chat",
            messages=messages,
            tools=tools,
            tool_choice={"type": "function", "function": {"name": "get_weather"}},
        )
        message = first.choices[0].message
        self.assertEqual(first.choices[0].finish_reason, "tool_calls")
        self.assertIsNone(message.content)
        call = message.tool_calls[0]
        self.assertEqual(call.type, "function")
        self.assertEqual(call.function.name, "get_weather")
        self.assertIsInstance(json.loads(call.function.arguments)["city"], str)
        messages += [
            message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "sunny, 21 C"},
        ]
        raw = client(TEST).chat.completions.with_raw_response.create(
            model="chat", messages=messages, tools=tools
        )
        second = raw.parse()
        self.assertIsNone(second.choices[0].message.tool_calls)
        self.assertTrue(second.choices[0].message.content)
        stored = task(raw.headers["x-taskgate-task-id"], TEST)
        self.assertEqual(stored["input"]["messages"][2]["role"], "tool")

    def test_a_streamed_tool_call(self):
        stream = client(TEST).chat.completions.create(
            model="chat",
            messages=[{"role": "user", "content": "Weather in Paris?"}],
            tools=[{"type": "function", "function": {"name": "get_weather", "parameters": {
                "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
            tool_choice="required",
            stream=True,
        )
        name, arguments, finish = None, "", None
        for chunk in stream:
            if not chunk.choices:
                continue
            for call in chunk.choices[0].delta.tool_calls or []:
                self.assertEqual(call.index, 0)
                name = name or call.function.name
                arguments += call.function.arguments or ""
            finish = chunk.choices[0].finish_reason or finish
        self.assertEqual(name, "get_weather")
        self.assertIsInstance(json.loads(arguments)["city"], str)
        self.assertEqual(finish, "tool_calls")

    def test_the_stream_helper_and_parse_with_a_schema(self):
        # The fake upstream, offered tools, calls one; the helper assembles
        # the streamed call and parses its arguments for a pydantic tool.
        class GetWeather(pydantic.BaseModel):
            city: str

        with client().chat.completions.stream(
            model="chat",
            messages=[{"role": "user", "content": "Weather in Paris?"}],
            tools=[openai.pydantic_function_tool(GetWeather, name="get_weather")],
        ) as stream:
            done = [e for e in stream if e.type == "tool_calls.function.arguments.done"]
            completion = stream.get_final_completion()
        self.assertEqual(done[0].parsed_arguments, GetWeather(city="Paris"))
        call = completion.choices[0].message.tool_calls[0]
        self.assertEqual(call.function.parsed_arguments, GetWeather(city="Paris"))
        self.assertEqual(completion.choices[0].finish_reason, "tool_calls")

        # A test key answers a JSON schema with JSON valid for it.
        class Forecast(pydantic.BaseModel):
            city: str
            days: int

        parsed = client(TEST).chat.completions.parse(
            model="chat",
            messages=[{"role": "user", "content": "The forecast for Paris"}],
            response_format=Forecast,
        )
        self.assertIsInstance(parsed.choices[0].message.parsed, Forecast)
        with client(TEST).chat.completions.stream(
            model="chat",
            messages=[{"role": "user", "content": "The forecast for Paris"}],
            response_format=Forecast,
        ) as stream:
            streamed = stream.get_final_completion()
        self.assertEqual(streamed.choices[0].message.parsed, parsed.choices[0].message.parsed)

    def test_embeddings(self):
        # The SDK asks for base64 by default and decodes it.
        result = client().embeddings.create(model="embed", input=["a cat", "a dog"])
        self.assertEqual([d.index for d in result.data], [0, 1])
        self.assertEqual(len(result.data[0].embedding), 3)
        floats = client().embeddings.create(model="embed", input="a cat", encoding_format="float")
        self.assertEqual(len(floats.data), 1)
        for a, b in zip(result.data[0].embedding, floats.data[0].embedding):
            self.assertAlmostEqual(a, b, places=5)

    def test_a_bad_key_is_an_authentication_error(self):
        with self.assertRaises(openai.AuthenticationError) as caught:
            client("tg_live_" + "x" * 40, max_retries=0).models.list()
        self.assertEqual(caught.exception.status_code, 401)
        self.assertIsInstance(caught.exception.body, dict)
        self.assertIn("code", caught.exception.body)

    def test_the_rate_limit_is_a_rate_limit_error(self):
        limited = client(LIMITED, max_retries=0)
        with self.assertRaises(openai.RateLimitError) as caught:
            for _ in range(20):
                limited.models.list()
        self.assertEqual(caught.exception.body["code"], "rate_limit_exceeded")
        self.assertGreaterEqual(int(caught.exception.response.headers["retry-after"]), 1)

    def test_refusals(self):
        with self.assertRaises(openai.NotFoundError) as caught:
            client().chat.completions.create(model="no-such-model", messages=MESSAGES)
        self.assertEqual(caught.exception.body["param"], "model")
        with self.assertRaises(openai.BadRequestError) as caught:
            client().chat.completions.create(model="chat", messages=MESSAGES, logprobs=True)
        self.assertEqual(caught.exception.body["code"], "unsupported_parameter")
        self.assertEqual(caught.exception.body["param"], "logprobs")
        with self.assertRaises(openai.PermissionDeniedError):
            client(RESTRICTED).chat.completions.create(model="chat", messages=MESSAGES)


if __name__ == "__main__":
    unittest.main()
