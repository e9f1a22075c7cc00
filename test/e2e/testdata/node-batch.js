// Runs a batch with the official openai npm package through two gateways and prints what it saw
// as JSON: node node-batch.js BASE_URL_A BASE_URL_B KEY
const OpenAI = require('openai');
const { toFile } = require('openai');

async function main() {
  const [baseA, baseB, apiKey] = process.argv.slice(2);
  const a = new OpenAI({ baseURL: baseA, apiKey, maxRetries: 0 });
  const b = new OpenAI({ baseURL: baseB, apiKey, maxRetries: 0 });
  const lines = [1, 2, 3].map((i) => JSON.stringify({
    custom_id: `line-${i}`, method: 'POST', url: '/v1/chat/completions',
    body: { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Say hello.' }] },
  }));
  const file = await a.files.create({ file: await toFile(Buffer.from(lines.join('\n') + '\n'), 'in.jsonl'), purpose: 'batch' });
  let batch = await b.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
  const final = ['completed', 'failed', 'expired', 'cancelled'];
  for (let i = 0; i < 400 && !final.includes(batch.status); i++) {
    await new Promise((r) => setTimeout(r, 50));
    batch = await a.batches.retrieve(batch.id);
  }
  const ids = async (client, id) => {
    if (!id) return [];
    const text = await (await client.files.content(id)).text();
    return text.trim().split('\n').map((l) => JSON.parse(l).custom_id);
  };
  const out = {
    status: batch.status, request_counts: batch.request_counts,
    output: await ids(b, batch.output_file_id), errors: await ids(a, batch.error_file_id),
  };

  const bad = await b.files.create({ file: await toFile(Buffer.from('not json\n'), 'bad.jsonl'), purpose: 'batch' });
  const refused = await a.batches.create({ input_file_id: bad.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
  const again = await b.batches.retrieve(refused.id);
  out.refused = { status: again.status === 'failed' ? 0 : 1, code: again.errors && again.errors.data[0].code };
  console.log(JSON.stringify(out));
}

main().catch((err) => { console.error(err); process.exit(1); });
