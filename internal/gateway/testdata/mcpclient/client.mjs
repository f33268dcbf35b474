// The official TypeScript MCP client against the gateway's /mcp.
//
//   node client.mjs URL TOKEN CALLS_JSON [ANSWER]
//
// Connects as the holder of TOKEN, lists the tools, makes each call of
// CALLS_JSON ([{"name","arguments"}]) and prints one JSON object:
// {"protocolVersion","sessionId","tools","results","elicited"}. With
// ANSWER the client declares form elicitation and its user accepts every
// elicitation with {"answer": ANSWER} ("elicited" lists what it was
// asked). A failure to connect prints {"error"} and exits 3.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [url, token, callsJSON, answer] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client(
  { name: "toolgate-ts-test", version: "1.0.0" },
  answer === undefined ? undefined : { capabilities: { elicitation: { form: {} } } },
);
const elicited = [];
if (answer !== undefined) {
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    elicited.push(req.params);
    return { action: "accept", content: { answer } };
  });
}
try {
  await client.connect(transport);
} catch (err) {
  process.stdout.write(JSON.stringify({ error: String(err && err.message ? err.message : err) }) + "\n");
  process.exit(3);
}
const out = {
  protocolVersion: transport.protocolVersion ?? null,
  sessionId: transport.sessionId ?? null,
  tools: (await client.listTools()).tools,
  results: [],
  elicited,
};
for (const call of JSON.parse(callsJSON || "[]")) {
  try {
    out.results.push(await client.callTool({ name: call.name, arguments: call.arguments }));
  } catch (err) {
    out.results.push({ rpcError: { code: err.code ?? null, message: String(err.message) } });
  }
}
await client.close();
process.stdout.write(JSON.stringify(out) + "\n");
