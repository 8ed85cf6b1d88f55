// Tool calling through the official OpenAI client for Node against a running `tessera serve`:
// tool_choice required and named (the grammar makes the calls; they must parse and validate),
// parallel_tool_calls false, streamed calls assembled from deltas, zodFunction's parsed
// arguments, tool_choice auto and none, a conversation that returns a tool's result, and the
// errors for bad tools. Usage: node tool_calls.mjs BASE_URL MODEL API_KEY
import { check, clientFromArguments, expectError } from "./checks.mjs";
import { zodFunction } from "openai/helpers/zod";
import { z } from "zod";

const { client, model } = clientFromArguments();

// Small tools: the test model reads 512 positions, and the tools prompt takes most of them.
const Weather = z.object({ city: z.string().max(8), unit: z.enum(["c", "f"]) });
const Time = z.object({ zone: z.string().max(5) });
const tools = [
  { type: "function", function: { name: "weather",
    parameters: { type: "object", properties: { city: { type: "string", maxLength: 8 },
                                                unit: { enum: ["c", "f"] } },
                  required: ["city", "unit"], additionalProperties: false } } },
  { type: "function", function: { name: "time",
    parameters: { type: "object", properties: { zone: { type: "string", maxLength: 5 } },
                  required: ["zone"], additionalProperties: false } } },
];
const messages = [{ role: "user", content: "Weather in Paris?" }];
const schemas = { weather: Weather, time: Time };

function validCalls(message, what) {
  check(Array.isArray(message.tool_calls) && message.tool_calls.length > 0, `${what}: has tool_calls`);
  for (const call of message.tool_calls) {
    check(call.type === "function" && call.id.startsWith("call_"), `${what}: call id ${call.id}`);
    const schema = schemas[call.function.name];
    check(schema && schema.safeParse(JSON.parse(call.function.arguments)).success,
          `${what}: ${call.function.name}(${call.function.arguments}) validates`);
  }
}

// parallel_tool_calls false bounds the list: this model, greedy, would list calls until the
// context ends (the grammar's list of any length is tested in test_tool_calls).
for (const temperature of [0, 1]) {
  const required = await client.chat.completions.create({
    model, messages, tools, tool_choice: "required", parallel_tool_calls: false, temperature, seed: 4,
  });
  check(required.choices[0].finish_reason === "tool_calls", `required (t=${temperature}): finish_reason tool_calls`);
  validCalls(required.choices[0].message, `required (t=${temperature})`);
}

const single = await client.chat.completions.create({
  model, messages, tools, tool_choice: "required", parallel_tool_calls: false, temperature: 1,
  seed: 8,
});
validCalls(single.choices[0].message, "parallel_tool_calls false");
check(single.choices[0].message.tool_calls.length === 1, "parallel_tool_calls false: one call");

const named = await client.chat.completions.create({
  model, messages, tools, temperature: 0,
  tool_choice: { type: "function", function: { name: "time" } },
});
validCalls(named.choices[0].message, "named tool_choice");
check(named.choices[0].message.tool_calls[0].function.name === "time", "named: the named function");

const stream = await client.chat.completions.create({
  model, messages, tools, tool_choice: "required", parallel_tool_calls: false, temperature: 0,
  stream: true,
});
const streamed = [];
let streamFinish = null;
let streamedContent = "";
for await (const chunk of stream)
  for (const choice of chunk.choices) {
    streamedContent += choice.delta.content ?? "";
    for (const delta of choice.delta.tool_calls ?? []) {
      streamed[delta.index] ??= { id: delta.id, type: "function", function: { name: "", arguments: "" } };
      streamed[delta.index].function.name += delta.function?.name ?? "";
      streamed[delta.index].function.arguments += delta.function?.arguments ?? "";
    }
    if (choice.finish_reason) streamFinish = choice.finish_reason;
  }
check(streamFinish === "tool_calls" && streamedContent === "", "stream: finish tool_calls, no content");
validCalls({ tool_calls: streamed }, "stream");

const parsed = await client.chat.completions.parse({
  model, messages, temperature: 0, tool_choice: "required", parallel_tool_calls: false,
  tools: [zodFunction({ name: "weather", parameters: Weather })],
});
const parsedCall = parsed.choices[0].message.tool_calls[0];
check(Weather.safeParse(parsedCall.function.parsed_arguments).success,
      `zodFunction: parsed_arguments ${JSON.stringify(parsedCall.function.parsed_arguments)}`);

const auto = await client.chat.completions.create({
  model, messages, tools, temperature: 0, max_tokens: 30,
});
check(auto.choices[0].message.content.length > 0 && !auto.choices[0].message.tool_calls,
      "auto: the test model answers in text (its calls are found by the unit tests)");
const none = await client.chat.completions.create({
  model, messages, tools, tool_choice: "none", temperature: 0, max_tokens: 10,
});
check(!none.choices[0].message.tool_calls, "none: no tool calls");

const followUp = await client.chat.completions.create({
  model, temperature: 0, max_tokens: 10, tools,
  messages: [
    ...messages,
    { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function",
      function: { name: "weather", arguments: "{\"city\": \"Paris\", \"unit\": \"c\"}" } }] },
    { role: "tool", tool_call_id: "call_1", content: "18 degrees and sunny" },
  ],
});
check(followUp.choices[0].message.role === "assistant", "a conversation with a tool result");

await expectError(client.chat.completions.create({
  model, messages, tools, tool_choice: { type: "function", function: { name: "nope" } },
}), 400, "a named function that is not offered", "tool_choice");
await expectError(client.chat.completions.create({
  model, messages, tool_choice: "required",
}), 400, "required without tools", "tool_choice");
await expectError(client.chat.completions.create({
  model, messages, tools: [{ type: "function", function: { description: "no name" } }],
}), 400, "a tool without a name", "tools[0].function.name");
await expectError(client.chat.completions.create({
  model, messages, tools, tool_choice: "required", response_format: { type: "json_object" },
}), 400, "tools with a response_format", "tool_choice");
await expectError(client.chat.completions.create({
  model, messages: [...messages, { role: "tool", content: "x" }],
}), 400, "a tool message without tool_call_id", "messages");

console.log("all tool call checks passed");
