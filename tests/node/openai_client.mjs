// The official OpenAI client for Node against a running `tessera serve`: completions, chat,
// streaming, usage, logprobs, n, errors and the API key. Usage:
//   node openai_client.mjs BASE_URL MODEL API_KEY
// Prints one line per check; exits 1 at the first failure, naming it.
import { check, clientFromArguments, clientOf, expectError } from "./checks.mjs";

const { client, model, baseURL } = clientFromArguments();

const prompt = "Once upon a time";
// ignore_eos (vLLM's extension) makes every length below exact whatever the model.
const whole = await client.completions.create({
  model, prompt, max_tokens: 24, temperature: 0, ignore_eos: true,
});
check(whole.object === "text_completion", "completion object");
check(whole.choices.length === 1 && whole.choices[0].text.length > 0, "completion has text");
check(whole.choices[0].finish_reason === "length", "finish_reason length at max_tokens");
check(whole.usage.completion_tokens === 24, "usage counts 24 completion tokens");
check(whole.usage.total_tokens === whole.usage.prompt_tokens + 24, "usage total");

let streamed = "";
let finish = null;
let usage = null;
const stream = await client.completions.create({
  model, prompt, max_tokens: 24, temperature: 0, ignore_eos: true, stream: true,
  stream_options: { include_usage: true },
});
for await (const chunk of stream) {
  if (chunk.usage) usage = chunk.usage;
  for (const choice of chunk.choices) {
    streamed += choice.text;
    if (choice.finish_reason) finish = choice.finish_reason;
  }
}
check(streamed === whole.choices[0].text, "streamed text equals the whole completion (greedy)");
check(finish === "length", "stream ends with finish_reason");
check(usage && usage.completion_tokens === 24, "stream_options.include_usage sends usage");

const stopped = await client.completions.create({
  model, prompt, max_tokens: 24, temperature: 0, ignore_eos: true,
  stop: [whole.choices[0].text.slice(5, 9)],
});
check(stopped.choices[0].finish_reason === "stop", "a stop string stops");
check(stopped.choices[0].text === whole.choices[0].text.slice(0, 5),
      "the text ends before the stop string");

const chat = await client.chat.completions.create({
  model, messages: [{ role: "user", content: "Tell me a story." }], max_tokens: 12, temperature: 0,
  ignore_eos: true,
});
check(chat.object === "chat.completion", "chat object");
check(chat.choices[0].message.role === "assistant", "chat message role");
check(chat.choices[0].message.content.length > 0, "chat has content");

let chatText = "";
let sawRole = false;
let chatUsage = null;
const chatStream = await client.chat.completions.create({
  model, messages: [{ role: "user", content: "Tell me a story." }], max_tokens: 12,
  temperature: 0, ignore_eos: true, stream: true, stream_options: { include_usage: true },
});
for await (const chunk of chatStream) {
  if (chunk.usage) chatUsage = chunk.usage;
  for (const choice of chunk.choices) {
    if (choice.delta.role === "assistant") sawRole = true;
    chatText += choice.delta.content ?? "";
  }
}
check(sawRole, "chat stream sends the role first");
check(chatText === chat.choices[0].message.content, "chat stream equals the whole chat answer");
check(chatUsage && chatUsage.completion_tokens === 12, "chat stream usage");

const seeded = { model, prompt, max_tokens: 16, temperature: 1.0, seed: 1234 };
const a = await client.completions.create(seeded);
const b = await client.completions.create(seeded);
check(a.choices[0].text === b.choices[0].text, "the same seed gives the same text");

const many = await client.completions.create({ ...seeded, n: 3 });
check(many.choices.length === 3 && many.choices.map((c) => c.index).join() === "0,1,2",
      "n = 3 gives three choices");
check(many.choices[0].text === a.choices[0].text, "choice 0 of a seeded n > 1 equals n = 1");

const withLogprobs = await client.completions.create({
  model, prompt, max_tokens: 5, temperature: 0, logprobs: 3,
});
const lp = withLogprobs.choices[0].logprobs;
check(lp && lp.tokens.length === 5 && lp.token_logprobs.length === 5, "completion logprobs");
check(lp.token_logprobs.every((v) => v <= 0) && Object.keys(lp.top_logprobs[0]).length >= 1,
      "logprobs are log-probabilities with top alternatives");
const chatLogprobs = await client.chat.completions.create({
  model, messages: [{ role: "user", content: "Hi" }], max_tokens: 3, temperature: 0,
  logprobs: true, top_logprobs: 2,
});
check(chatLogprobs.choices[0].logprobs.content.length === 3 &&
      chatLogprobs.choices[0].logprobs.content[0].top_logprobs.length === 2, "chat logprobs");

const models = await client.models.list();
check(models.data.some((m) => m.id === model), "models.list names the served model");

await expectError(client.completions.create({ model: "no-such-model", prompt }), 404,
                  "an unknown model");
await expectError(client.completions.create({ model, prompt, max_tokens: 100000 }), 400,
                  "max_tokens beyond the context", "max_tokens");
await expectError(client.completions.create({ model, prompt, temperature: "hot" }), 400,
                  "a string temperature", "temperature");
await expectError(client.chat.completions.create({ model, messages: [] }), 400,
                  "empty messages", "messages");
const stranger = clientOf(baseURL, "wrong");
await expectError(stranger.completions.create({ model, prompt }), 401, "a wrong API key");
console.log("all OpenAI client checks passed");
