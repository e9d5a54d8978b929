// A long-lived @kubernetes/client-node program: load one kubeconfig file, list namespaces N
// times with one API object, print one JSON line per attempt ({"ok": [...names]} or
// {"error": message}). Usage: node list_namespaces.mjs KUBECONFIG [N]
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';

const [file, times = '1'] = process.argv.slice(2);
const kc = new KubeConfig();
kc.loadFromFile(file);
const api = kc.makeApiClient(CoreV1Api);
for (let i = 0; i < Number(times); i++) {
  try {
    const list = await api.listNamespace();
    console.log(JSON.stringify({ ok: list.items.map((ns) => ns.metadata.name) }));
  } catch (error) {
    // The exec plugin's failure is an Error whose message is its stderr, verbatim.
    console.log(JSON.stringify({ error: String(error?.message ?? error), code: error?.code ?? null }));
  }
}
