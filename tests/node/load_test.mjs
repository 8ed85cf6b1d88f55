// 64 concurrent clients against a running `tessera serve`: mixed prompt lengths and max_tokens,
// some streaming, a few disconnecting mid-stream. Every greedy answer must equal the answer the
// same prompt gets alone, none may be lost, and afterwards /metrics must show no running request
// and a KV-cache usage of zero. Usage: node load_test.mjs BASE_URL MODEL API_KEY [CLIENTS]
import OpenAI from "openai";

const [baseURL, model, apiKey, clientsArg] = process.argv.slice(2);
const clients = Number(clientsArg ?? 64);
const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey, maxRetries: 0, timeout: 300000 });
const words = ["Once upon a time", "The little dog", "Lily and Ben went", "One day, a bird",
               "The sun was shining and", "Tom had a red ball. He"];

function job(i) {
  const prompt = Array.from({ length: 1 + (i % 4) }, (_, k) => words[(i + k) % words.length]).join(" ");
  return { prompt, max_tokens: 8 + ((i * 7) % 40), stream: i % 2 === 1, disconnect: i % 16 === 5 };
}

async function complete({ prompt, max_tokens, stream, disconnect }) {
  const request = { model, prompt, max_tokens, temperature: 0 };
  if (!stream) return (await client.completions.create(request)).choices[0].text;
  const controller = new AbortController();
  const chunks = await client.completions.create({ ...request, stream: true },
                                                 { signal: controller.signal });
  let text = "";
  let received = 0;
  try {
    for await (const chunk of chunks) {
      text += chunk.choices[0]?.text ?? "";
      if (disconnect && ++received === 3) {
        controller.abort();  // the client goes away mid-stream
        return null;
      }
    }
  } catch (error) {
    if (disconnect) return null;
    throw error;
  }
  return text;
}

const jobs = Array.from({ length: clients }, (_, i) => job(i));
const expected = new Map();
for (const j of jobs) {  // each prompt alone, one at a time
  const key = `${j.prompt}|${j.max_tokens}`;
  if (!expected.has(key)) expected.set(key, await complete({ ...j, stream: false, disconnect: false }));
}
const started = Date.now();
const results = await Promise.allSettled(jobs.map((j) => complete(j)));
const seconds = (Date.now() - started) / 1000;
let failures = 0;
let disconnected = 0;
results.forEach((result, i) => {
  const j = jobs[i];
  if (result.status === "rejected") {
    failures++;
    console.error(`client ${i} failed: ${result.reason}`);
  } else if (result.value === null) {
    disconnected++;
  } else if (result.value !== expected.get(`${j.prompt}|${j.max_tokens}`)) {
    failures++;
    console.error(`client ${i}: the answer differs from the one it gets alone`);
  }
});
console.log(`${clients} clients in ${seconds.toFixed(2)} s: ${clients - failures - disconnected} ` +
            `exact, ${disconnected} disconnected on purpose, ${failures} failed`);

async function gauge(name) {
  const text = await (await fetch(`${baseURL}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`tessera:${name}{`));
  return Number(line.split(" ").pop());
}
let running = -1;
let usage = -1;
for (let attempt = 0; attempt < 50; attempt++) {  // aborts land within a poll interval or two
  running = await gauge("num_requests_running");
  usage = await gauge("kv_cache_usage_perc");
  if (running === 0 && usage === 0) break;
  await new Promise((resolve) => setTimeout(resolve, 100));
}
console.log(`afterwards: ${running} running, KV-cache usage ${usage}`);
if (failures > 0 || running !== 0 || usage !== 0) process.exit(1);
console.log("load test passed");
