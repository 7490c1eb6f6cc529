// One way the pages post JSON to Paywarden: same-origin, and a refusal becomes an Error carrying
// the sentence the server wrote for people.
window.paywardenPost = async function (url, body) {
  const response = await fetch(url, {
    method: "POST",
    headers: {"Content-Type": "application/json", "Accept": "application/json"},
    credentials: "same-origin",
    body: JSON.stringify(body),
  });
  let answer = {};
  try { answer = await response.json(); } catch (ignored) { answer = {}; }
  if (!response.ok) {
    throw new Error(answer.message || "Paywarden could not finish this step. Please try again.");
  }
  return answer;
};
