// What the OpenAI-client scripts share: a client for the server on the command line, and checks
// that print one line each and exit 1 at the first failure, naming it.
import OpenAI from "openai";

// A client of the server at `baseURL` with `apiKey`.
export function clientOf(baseURL, apiKey) {
  return new OpenAI({ baseURL: `${baseURL}/v1`, apiKey, maxRetries: 0, timeout: 60000 });
}

// node SCRIPT BASE_URL MODEL API_KEY
export function clientFromArguments() {
  const [baseURL, model, apiKey] = process.argv.slice(2);
  return { client: clientOf(baseURL, apiKey), model, baseURL };
}

export function check(condition, what) {
  if (!condition) {
    console.error(`FAILED: ${what}`);
    process.exit(1);
  }
  console.log(`ok: ${what}`);
}

// The call must fail with `status`, its error naming `param` (when given) and its message holding
// `text` (when given).
export async function expectError(promise, status, what, param, text) {
  try {
    await promise;
  } catch (error) {
    check(error.status === status, `${what}: status ${error.status} is ${status}`);
    if (param) check(error.param === param, `${what}: param '${error.param}' is '${param}'`);
    check(typeof error.message === "string" && error.message.length > 0, `${what}: has a message`);
    if (text) check(error.message.includes(text), `${what}: message '${error.message}' names ${text}`);
    return;
  }
  check(false, `${what}: should have failed with ${status}`);
}
