// prompt-rubric: the offline stand-in for a model. PROTECTED.
//
// evaluate.ts uses it when no model endpoint is configured (AUTOLAB_EXAMPLE_BASE_URL unset),
// so the example runs with no network and no model at all. It is a literal-minded,
// deterministic instruction follower — nothing like a real model's quality, but it reacts to
// a prompt the way models tend to, so a better prompt scores better:
//
// - it reads the case notes of the last "Case:" block (Customer, Order, Resolution, Steps);
// - it does what the prompt asks in words it recognizes — the customer's name, the order
//   number, the resolution, apologizing, a bulleted list, a word limit, a sign-off, a tone —
//   and without instructions falls back to a vague, generic reply;
// - without a role telling it who it is, it talks about being an AI;
// - worked examples ("Example reply:") teach it their layout (greeting by name, the order,
//   the resolution, the sign-off); from three examples on it over-imitates, and copies the
//   last example's order number into the reply;
// - without a word limit it pads; with one, it drops padding first, then the end of the reply.

export function offlineReply(system: string, user: string): string {
  const prompt = `${system}\n${user}`;
  const p = prompt.toLowerCase();
  const lastCase = user.slice(user.lastIndexOf("Case:"));
  const field = (name: string) => new RegExp(`^${name}: (.*)$`, "m").exec(lastCase)?.[1]?.trim() ?? "";
  const name = field("Customer");
  const order = field("Order");
  const resolution = field("Resolution").replace(/\.$/, "");
  const stepsLine = field("Steps for the customer").replace(/\.$/, "");
  const steps = stepsLine ? stepsLine.split(/;\s*/) : [];
  const complaint = /(not|never|twice|wrong|cracked|broken|missing|no refund|without)\b/i.test(
    field("Message"),
  );

  const examples = [...user.matchAll(/Example reply:\n([\s\S]*?)(?=\n\n---\n\n|$)/g)].map((m) => m[1] ?? "");
  const imitate = examples.length > 0;
  const tone = /tone: (\w+)/.exec(p)?.[1] ?? "neutral";
  const byName = /by name/.test(p) || (imitate && examples.some((e) => /^hello \w+,/im.test(e)));
  const withOrder = /order number/.test(p) || (imitate && examples.some((e) => /order [a-z]-\d{4}/i.test(e)));
  const withResolution = /resolution/.test(p.replace(/^resolution: .*$/gm, "")) || imitate;
  const apologize = /apologi[sz]e/.test(p) || (imitate && examples.some((e) => /sorry/i.test(e)));
  const bullets =
    /bulleted list|one step a line/.test(p) || (imitate && examples.some((e) => /^- /m.test(e)));
  const signOff =
    /sign off as "([^"]+)"/i.exec(prompt)?.[1] ??
    (imitate ? /^— (.+)$/m.exec(examples[0] ?? "")?.[1] : undefined);
  const limit = Number(
    /under (\d+) words|at most (\d+) words/.exec(p)?.slice(1).find(Boolean) ?? Number.POSITIVE_INFINITY,
  );
  const knowsRole = /you are a customer support agent/.test(p);

  // The parts in the order a reply has them; `pad` is dropped first under a word limit.
  const parts: { text: string; pad?: boolean }[] = [];
  if (!knowsRole)
    parts.push({ text: "As an AI language model, I will do my best to help with your request." });
  if (tone !== "terse") {
    const who = byName && name ? ` ${name}` : tone === "formal" ? " customer" : "";
    parts.push({
      text: tone === "formal" ? `Dear${who},` : tone === "friendly" ? `Hi${who}!` : `Hello${who},`,
    });
  }
  if (tone === "friendly")
    parts.push({ text: "I'm so sorry for any trouble, and thanks so much for reaching out!" });
  else if (apologize && complaint) parts.push({ text: "We are sorry for the trouble." });
  const about = withOrder && order ? `About order ${order}: ` : "About your order: ";
  parts.push({
    text: withResolution && resolution ? `${about}${resolution}.` : `${about}we are looking into it.`,
  });
  if (steps.length) {
    parts.push({
      text: bullets ? steps.map((s) => `- ${s}`).join("\n") : `Please ${steps.join(", then ")}.`,
    });
  }
  if (examples.length >= 3) {
    const leaked = /order ([A-Z]-\d{4})/.exec(examples.at(-1) ?? "")?.[1];
    if (leaked) parts.push({ text: `(Reference: ${leaked}.)` });
  }
  parts.push({
    pad: true,
    text: "We truly value you as a customer and we understand how important your order is to you. Our team works hard every day to make sure every parcel arrives on time and in perfect condition, and we are always looking for ways to improve our service. If there is anything else at all that we can do for you, please do not hesitate to get in touch with us again at any time.",
  });
  if (tone === "formal")
    parts.push({ pad: true, text: "Please accept our assurances of continued attention." });
  if (signOff) parts.push({ text: `— ${signOff}` });
  else if (tone === "formal") parts.push({ text: "Kind regards" });

  const words = (s: string) => s.split(/\s+/).filter(Boolean).length;
  let kept = parts;
  const total = () => kept.reduce((n, x) => n + words(x.text), 0);
  if (total() > limit) kept = kept.filter((x) => !x.pad);
  let text = kept.map((x) => x.text).join("\n\n");
  if (words(text) > limit) {
    // cut at the limit, keeping line breaks: the end of the reply is lost
    let left = limit;
    text = text
      .split("\n")
      .map((line) => {
        const w = line.split(/\s+/).filter(Boolean);
        const keep = w.slice(0, Math.max(0, left));
        left -= keep.length;
        return keep.join(" ");
      })
      .join("\n")
      .trim();
  }
  return text;
}
