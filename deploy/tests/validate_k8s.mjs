// Offline schema check of Kubernetes objects: reads a JSON array of objects
// on stdin (kubectl kustomize's output converted by k8s_to_json.py) and
// validates each against the JSON schema of its apiVersion/kind from the
// kubernetes-models npm package (generated from Kubernetes' OpenAPI spec).
// Usage: node validate_k8s.mjs NODE_MODULES_DIR < objects.json
// Exit 0: every object is valid; 1: a list of errors on stderr.
// Not checked (the schemas allow them): fields Kubernetes does not know.
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const modules = process.argv[2];
const objects = JSON.parse(readFileSync(0, "utf8"));
let failures = 0;
for (const object of objects) {
  const where = `${object.kind ?? "?"}/${object.metadata?.name ?? "?"}`;
  if (typeof object.apiVersion !== "string" || typeof object.kind !== "string") {
    console.error(`${where}: no apiVersion or kind`);
    failures++;
    continue;
  }
  // Core kinds are kubernetes-models'; the Prometheus Operator's CRDs its sibling package's.
  const pkg = object.apiVersion.startsWith("monitoring.coreos.com/")
    ? "@kubernetes-models/prometheus-operator"
    : "kubernetes-models";
  const file = `${modules}/${pkg}/${object.apiVersion}/${object.kind}.js`;
  let model;
  try {
    model = (await import(pathToFileURL(file).href))[object.kind];
  } catch (e) {
    console.error(`${where}: no schema for ${object.apiVersion} ${object.kind} (${e.message.split("\n")[0]})`);
    failures++;
    continue;
  }
  try {
    new model(object).validate();
    console.log(`valid: ${object.apiVersion} ${where}`);
  } catch (e) {
    console.error(`${where}: ${e.message}`);
    failures++;
  }
}
if (objects.length === 0) {
  console.error("no objects to validate");
  process.exit(1);
}
process.exit(failures === 0 ? 0 : 1);
