// Runs the official openai npm package through the gateway and prints what it saw as JSON:
// node node-sdk.js BASE_URL KEY BURST_KEY DAILY_KEY
const OpenAI = require('openai');

async function main() {
  const [baseURL, apiKey, burstKey, dailyKey] = process.argv.slice(2);
  const out = {};
  const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
  const messages = [{ role: 'user', content: 'Say hello.' }];

  const chat = await client.chat.completions.create({ model: 'gpt-4o-mini', messages });
  out.chat = { content: chat.choices[0].message.content, total: chat.usage.total_tokens };

  let content = '', total = 0;
  const stream = await client.chat.completions.create({ model: 'gpt-4o-mini', messages, stream: true, stream_options: { include_usage: true } });
  for await (const chunk of stream) {
    for (const choice of chunk.choices) content += choice.delta.content || '';
    if (chunk.usage) total = chunk.usage.total_tokens;
  }
  out.stream = { content, total };

  const response = await client.responses.create({ model: 'gpt-4o-mini', input: 'Say hello.', max_output_tokens: 50 });
  out.response = { content: response.output_text, total: response.usage.total_tokens };

  let completed = 0;
  const events = await client.responses.create({ model: 'gpt-4o-mini', input: 'Say hello.', stream: true });
  for await (const event of events) {
    if (event.type === 'response.completed') completed = event.response.usage.total_tokens;
  }
  out.responseStream = { total: completed };

  const embedding = await client.embeddings.create({ model: 'text-embedding-3-small', input: 'The food was delicious.' });
  out.embedding = { count: embedding.data.length, prompt: embedding.usage.prompt_tokens };

  // A client that retries: statuses holds every answer it received, retries included.
  const statuses = [];
  const burst = new OpenAI({
    baseURL, apiKey: burstKey, maxRetries: 2,
    fetch: async (url, init) => { const res = await fetch(url, init); statuses.push(res.status); return res; },
  });
  for (let i = 0; i < 2; i++) {
    await burst.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] });
  }
  out.retried = statuses.slice();

  statuses.length = 0;
  try {
    await burst.chat.completions.create({ model: 'gpt-4o-mini', messages, max_tokens: 10000000 });
    out.tooLarge = { status: 200 };
  } catch (err) {
    out.tooLarge = { status: err.status, type: err.type, code: err.code, param: err.param, name: err.constructor.name };
  }
  out.tooLargeAnswers = statuses.slice();

  // A day's quota of one request: the second call is refused until midnight, which the SDK,
  // retrying twice, must not wait for.
  statuses.length = 0;
  const daily = new OpenAI({
    baseURL, apiKey: dailyKey, maxRetries: 2,
    fetch: async (url, init) => { const res = await fetch(url, init); statuses.push(res.status); return res; },
  });
  await daily.chat.completions.create({ model: 'gpt-4o-mini', messages });
  try {
    await daily.chat.completions.create({ model: 'gpt-4o-mini', messages });
    out.spent = { status: 200 };
  } catch (err) {
    out.spent = { status: err.status, type: err.type, code: err.code, name: err.constructor.name };
  }
  out.spentAnswers = statuses.slice();

  console.log(JSON.stringify(out));
}

main().catch((err) => { console.error(err); process.exit(1); });
