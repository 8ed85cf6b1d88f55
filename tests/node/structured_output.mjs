// Structured output through the official OpenAI client for Node against a running
// `tessera serve`: zod response formats (chat.completions.parse), raw json_schema and
// json_object response formats, streamed JSON, vLLM's guided_* fields, and refusals of what the
// grammar engine does not support. Every constrained answer must parse and validate, whatever
// the model (the test model writes stories). Usage:
//   node structured_output.mjs BASE_URL MODEL API_KEY
// Prints one line per check; exits 1 at the first failure, naming it.
import { check, clientFromArguments, expectError } from "./checks.mjs";
import { zodResponseFormat } from "openai/helpers/zod";
import { z } from "zod";

const { client, model } = clientFromArguments();

const messages = [{ role: "user", content: "Once upon a time there was a girl." }];
const Person = z.object({
  name: z.string().max(10),
  age: z.number().int().min(0).max(120),
  mood: z.enum(["happy", "sad"]),
  friends: z.array(z.string().max(6)).max(2),
  pet: z.object({ kind: z.string().max(5) }).nullable(),
});

for (const temperature of [0, 1]) {
  const completion = await client.chat.completions.parse({
    model, messages, temperature, seed: 3, max_tokens: 300,
    response_format: zodResponseFormat(Person, "person"),
  });
  const message = completion.choices[0].message;
  check(completion.choices[0].finish_reason === "stop", `zod (temperature ${temperature}): finish_reason stop`);
  check(message.parsed !== null && Person.safeParse(message.parsed).success,
        `zod (temperature ${temperature}): parsed and valid: ${message.content}`);
}

const raw = await client.chat.completions.create({
  model, messages, temperature: 0, max_tokens: 200,
  response_format: {
    type: "json_schema",
    json_schema: {
      name: "answer", strict: true,
      schema: {
        type: "object", additionalProperties: false, required: ["answer", "score"],
        properties: { answer: { type: "string", enum: ["yes", "no"] },
                      score: { type: "number", minimum: 0, maximum: 1 } },
      },
    },
  },
});
const answer = JSON.parse(raw.choices[0].message.content);
check(["yes", "no"].includes(answer.answer) && answer.score >= 0 && answer.score <= 1,
      `json_schema: ${raw.choices[0].message.content}`);

let streamed = "";
const stream = await client.chat.completions.create({
  model, messages, temperature: 0, max_tokens: 300, stream: true,
  response_format: zodResponseFormat(Person, "person"),
});
let streamFinish = null;
for await (const chunk of stream)
  for (const choice of chunk.choices) {
    streamed += choice.delta.content ?? "";
    if (choice.finish_reason) streamFinish = choice.finish_reason;
  }
check(streamFinish === "stop" && Person.safeParse(JSON.parse(streamed)).success,
      `streamed json_schema parses and validates: ${streamed}`);

const object = await client.chat.completions.create({
  model, messages, temperature: 1, seed: 9, max_tokens: 400,
  response_format: { type: "json_object" },
});
if (object.choices[0].finish_reason === "stop") {
  const parsed = JSON.parse(object.choices[0].message.content);
  check(typeof parsed === "object" && !Array.isArray(parsed), "json_object: an object");
} else {
  // max_tokens may cut an open-ended object; what was written is still a JSON prefix.
  check(object.choices[0].message.content.startsWith("{"), "json_object: starts an object");
}

const regex = await client.completions.create({
  model, prompt: "The year was", max_tokens: 20, temperature: 1, seed: 1,
  guided_regex: "(19|20)[0-9]{2}",
});
check(/^(19|20)[0-9]{2}$/.test(regex.choices[0].text), `guided_regex: ${regex.choices[0].text}`);

const choice = await client.completions.create({
  model, prompt: "Was the dog happy?", max_tokens: 10, temperature: 0,
  guided_choice: ["yes", "no", "a little"],
});
check(["yes", "no", "a little"].includes(choice.choices[0].text), `guided_choice: ${choice.choices[0].text}`);
check(choice.choices[0].finish_reason === "stop", "guided_choice: finish_reason stop");

const grammar = await client.completions.create({
  model, prompt: "Count:", max_tokens: 40, temperature: 1, seed: 2,
  structured_outputs: { grammar: 'root ::= num ("," num){2}\nnum ::= [1-9] [0-9]?' },
});
check(/^[1-9][0-9]?(,[1-9][0-9]?){2}$/.test(grammar.choices[0].text), `structured_outputs.grammar: ${grammar.choices[0].text}`);

await expectError(client.chat.completions.create({
  model, messages, response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "array", uniqueItems: true } } },
}), 400, "unsupported keyword", "response_format.json_schema.schema", "uniqueItems");
await expectError(client.completions.create({
  model, prompt: "x", guided_regex: "(a", guided_choice: ["a"],
}), 400, "two constraints", "guided_choice");
await expectError(client.completions.create({ model, prompt: "x", guided_regex: "(?=a)" }),
  400, "bad regex", "guided_regex", "lookaround");
await expectError(client.completions.create({ model, prompt: "x", guided_grammar: "root ::= root \"a\"" }),
  400, "left-recursive grammar", "guided_grammar", "left-recursive");

console.log("all structured output checks passed");
