// Runs a background response with the official openai npm package through the gateway and prints
// what it saw as JSON: node node-background.js BASE_URL KEY OTHER_TENANTS_KEY
const OpenAI = require('openai');

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function main() {
  const [baseURL, apiKey, otherKey] = process.argv.slice(2);
  const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
  const params = { model: 'gpt-4o-mini', input: 'Say hello.', background: true, max_output_tokens: 20 };
  const out = {};

  let response = await client.responses.create(params);
  out.created = response.status;
  while (response.status === 'queued' || response.status === 'in_progress') {
    await sleep(500);
    response = await client.responses.retrieve(response.id);
  }
  out.polled = { status: response.status, total: response.usage.total_tokens, text: response.output_text };

  const other = new OpenAI({ baseURL, apiKey: otherKey, maxRetries: 0 });
  try {
    await other.responses.retrieve(response.id);
    out.otherTenant = { status: 200 };
  } catch (err) {
    out.otherTenant = { status: err.status, name: err.constructor.name };
  }

  const stream = await client.responses.create({ ...params, stream: true });
  out.stream = { id: '', total: 0 };
  for await (const event of stream) {
    if (event.type === 'response.created') out.stream.id = event.response.id;
    if (event.type === 'response.completed') out.stream.total = event.response.usage.total_tokens;
  }

  const running = await client.responses.create(params);
  out.cancelled = (await client.responses.cancel(running.id)).status;
  console.log(JSON.stringify(out));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
