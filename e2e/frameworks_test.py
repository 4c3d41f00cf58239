"""Agent frameworks against Taskgate's doors: LangChain's ChatOpenAI.bind_tools
(langchain-openai) on /openai/v1, its ChatAnthropic (langchain-anthropic) on
/anthropic/v1, and the OpenAI Agents SDK (openai-agents) through its
chat-completions model.

Run through scripts/with-server.sh (it provides the server, the fake upstream
and the keys):
    scripts/with-server.sh python -m unittest e2e/frameworks_test.py

The `chat` API's upstream is the fake OpenAI
(crates/taskgate-providers/examples/fake_openai.rs): offered tools, it calls
one; given the tool's result, it answers "The tool said: " and that result.
So a live key runs each framework's tool loop to its end.
"""

import asyncio
import os
import unittest

# No traces to OpenAI's servers: the tests reach loopback only.
os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"
os.environ.pop("LANGSMITH_TRACING", None)
os.environ.pop("LANGCHAIN_TRACING_V2", None)

import agents  # noqa: E402
import openai  # noqa: E402
import pydantic  # noqa: E402
from langchain_anthropic import ChatAnthropic  # noqa: E402
from langchain_core.messages import HumanMessage  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langchain_openai import ChatOpenAI  # noqa: E402

agents.set_tracing_disabled(True)

SERVER = os.environ["TASKGATE_SERVER_URL"]
LIVE = os.environ["TASKGATE_API_KEY"]
TEST = os.environ["TASKGATE_TEST_KEY"]
QUESTION = "What is the weather in Paris?"
ANSWER = "The tool said: sunny in Paris"


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


class LangChain(unittest.TestCase):
    def round_trip(self, llm):
        bound = llm.bind_tools([get_weather])
        messages = [HumanMessage(QUESTION)]
        first = bound.invoke(messages)
        self.assertEqual(len(first.tool_calls), 1, first)
        call = first.tool_calls[0]
        self.assertEqual(call["name"], "get_weather")
        self.assertEqual(call["args"], {"city": "Paris"})
        # Invoked with the call, the tool answers a ToolMessage for it.
        messages += [first, get_weather.invoke(call)]
        second = bound.invoke(messages)
        self.assertEqual(second.tool_calls, [])
        self.assertEqual(second.text, ANSWER)

        # Streamed, the chunks add up to the same call.
        streamed = None
        for chunk in bound.stream([HumanMessage(QUESTION)]):
            streamed = chunk if streamed is None else streamed + chunk
        self.assertEqual(streamed.tool_calls[0]["name"], "get_weather")
        self.assertEqual(streamed.tool_calls[0]["args"], {"city": "Paris"})

    def test_chat_openai_bind_tools(self):
        self.round_trip(
            ChatOpenAI(model="chat", base_url=SERVER + "/openai/v1", api_key=LIVE, max_retries=0)
        )

    def test_chat_anthropic_bind_tools(self):
        self.round_trip(
            ChatAnthropic(
                model="chat", base_url=SERVER + "/anthropic", api_key=LIVE, max_retries=0
            )
        )


@agents.function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


class Forecast(pydantic.BaseModel):
    city: str
    days: int


class OpenAIAgents(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        self.clients = []
        # The test case runs its loop in debug mode, which logs every step
        # over 0.1 s (the SDK's first imports and connections).
        asyncio.get_running_loop().slow_callback_duration = 5

    async def asyncTearDown(self):
        for client in self.clients:
            await client.close()

    def model(self, key=LIVE):
        client = openai.AsyncOpenAI(base_url=SERVER + "/openai/v1", api_key=key, max_retries=0)
        self.clients.append(client)
        return agents.OpenAIChatCompletionsModel(model="chat", openai_client=client)

    def agent(self):
        return agents.Agent(
            name="weather",
            instructions="Answer with the weather.",
            model=self.model(),
            tools=[weather],
        )

    async def test_an_agent_runs_its_tool_to_completion(self):
        result = await agents.Runner.run(self.agent(), QUESTION)
        self.assertEqual(result.final_output, ANSWER)
        calls = [i for i in result.new_items if isinstance(i, agents.ToolCallItem)]
        outputs = [i for i in result.new_items if isinstance(i, agents.ToolCallOutputItem)]
        self.assertEqual(len(calls), 1)
        self.assertEqual(outputs[0].output, "sunny in Paris")

    async def test_a_streamed_run(self):
        result = agents.Runner.run_streamed(self.agent(), QUESTION)
        kinds = [e.type async for e in result.stream_events()]
        self.assertEqual(result.final_output, ANSWER)
        self.assertIn("raw_response_event", kinds)
        self.assertIn("run_item_stream_event", kinds)

    async def test_a_structured_output_type(self):
        # A test key answers a JSON schema with JSON valid for it.
        agent = agents.Agent(name="forecast", model=self.model(TEST), output_type=Forecast)
        result = await agents.Runner.run(agent, "The forecast for Paris")
        self.assertIsInstance(result.final_output, Forecast)


if __name__ == "__main__":
    unittest.main()
