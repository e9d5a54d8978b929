// A stand-in for Google's OAuth 2.0 for installed apps, on the real npm oidc-provider, built from
// Google's documentation (developers.google.com/identity/protocols/oauth2/native-app and
// .../web-server; /work/notes/aks-gke.md §D.6 lists what each point rests on):
//  * Google's paths: authorize /o/oauth2/v2/auth, token /token, revoke /revoke, certs
//    /oauth2/v3/certs, tokeninfo /tokeninfo?access_token=...
//  * "Desktop app" clients are public clients with a secret that is not secret: every token
//    request must carry client_secret, as HTTP Basic or in the body (Google takes both;
//    gcloud and Go's x/oauth2 send it in the body). Without it: 400 invalid_request
//    "client_secret is missing.".
//  * A refresh token only with access_type=offline, and only on the first consent of a user to
//    a client, or with prompt=consent: a later login without it gets none.
//  * Refresh tokens never rotate: a refresh answer carries no refresh_token. A revoked or
//    expired one: 400 invalid_grant "Token has been expired or revoked.". A Workspace reauth
//    (GET /test/reauth?email=...): every refresh of that person's is invalid_grant "reauth
//    related error (invalid_rapt)" until the person signs in again.
//  * Access tokens look like Google's ("ya29." ...), refresh tokens too ("1//" ...); the
//    tokeninfo endpoint says who a token is for and its scopes (GKE checks userinfo.email).
// Prints {"issuer": ...} when ready, like provider.mjs. Settings: one JSON argument,
// {"ttl": {"AccessToken": 3599, ...}}. GET /test/counts counts token requests by grant type.
import { generateKeyPairSync } from 'node:crypto';
import http from 'node:http';
import querystring from 'node:querystring';
import Provider from 'oidc-provider';

const settings = JSON.parse(process.argv[2] || '{}');
const ttl = { AccessToken: 3599, IdToken: 3600, RefreshToken: 180 * 86400, Grant: 180 * 86400,
  Session: 86400, Interaction: 600, ...(settings.ttl || {}) };
const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const jwk = { ...privateKey.export({ format: 'jwk' }), kid: 'google-standin', use: 'sig', alg: 'RS256' };

const G = 'https://www.googleapis.com/auth/';
const SCOPES = ['openid', 'email', 'profile', `${G}userinfo.email`, `${G}cloud-platform`,
  `${G}appengine.admin`, `${G}sqlservice.login`, `${G}compute`, `${G}accounts.reauth`];
const AT = 'ya29.';
const RT = '1//';

// Google's public "Desktop app" clients: gcloud's application-default client (kubetray's
// default), gcloud's own, and one registered by a user.
const desktop = (clientId, secret) => ({
  client_id: clientId,
  client_secret: secret,
  application_type: 'native',
  token_endpoint_auth_method: 'client_secret_basic',
  redirect_uris: ['http://127.0.0.1/', 'http://localhost/',
    'https://sdk.cloud.google.com/applicationdefaultauthcode.html',
    'https://sdk.cloud.google.com/authcode.html'],
  grant_types: ['authorization_code', 'refresh_token'],
  response_types: ['code'],
});
const clients = [
  desktop('764086051850-6qr4p6gpi6hn506pt8ejuq83di341hur.apps.googleusercontent.com', 'd-FL95Q19q7MQmFpd7hHD0Ty'),
  desktop('32555940559.apps.googleusercontent.com', 'ZmssLNjJy2998hD4CTg2ejr2'),
  desktop('1234567890-own.apps.googleusercontent.com', 'GOCSPX-own-desktop-secret'),
];
const secrets = Object.fromEntries(clients.map((c) => [c.client_id, c.client_secret]));

const server = http.createServer();
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

const consented = new Set(); // `${account}|${client}`: a first consent gives a refresh token
const offlineByCode = new Map(); // code → whether its exchange brings a refresh token
const reauth = new Set(); // emails whose next refresh needs a Workspace reauth
const counts = {};

const provider = new Provider(issuer, {
  clients,
  jwks: { keys: [jwk] },
  pkce: { required: () => false }, // recommended, not required, for clients with a secret
  routes: { authorization: '/o/oauth2/v2/auth', token: '/token', revocation: '/revoke',
    jwks: '/oauth2/v3/certs', userinfo: '/v1/userinfo' },
  extraParams: ['access_type', 'include_granted_scopes'],
  features: { devInteractions: { enabled: true }, revocation: { enabled: true } },
  ttl,
  scopes: SCOPES,
  claims: { openid: ['sub'], email: ['email', 'email_verified'],
    [`${G}userinfo.email`]: ['email', 'email_verified'], profile: ['name'] },
  conformIdTokenClaims: false,
  cookies: { keys: ['google-standin-cookie-key'] },
  async findAccount(ctx, id) {
    return { accountId: id, async claims() {
      return { sub: `1${Buffer.from(id).toString('hex')}`, email: `${id}@gmail.test`, email_verified: true, name: id };
    } };
  },
  // The grant is what was asked (the consent screen is the person's, not these tests').
  async loadExistingGrant(ctx) {
    const { client, session } = ctx.oidc;
    const grant = new ctx.oidc.provider.Grant({ clientId: client.clientId, accountId: session.accountId });
    grant.addOIDCScope(ctx.oidc.params.scope || 'openid');
    await grant.save();
    return grant;
  },
  issueRefreshToken: async (ctx, client, code) => offlineByCode.get(code.jti) === true,
  rotateRefreshToken: () => false,
});

// Which code brings a refresh token: access_type=offline, and a first consent or prompt=consent.
provider.on('authorization.success', (ctx, out) => {
  if (!out.code) return;
  reauth.delete(`${ctx.oidc.session.accountId}@gmail.test`); // the person signed in again
  const key = `${ctx.oidc.session.accountId}|${ctx.oidc.client.clientId}`;
  const first = !consented.has(key);
  consented.add(key);
  const consent = String(ctx.oidc.params.prompt || '').split(' ').includes('consent');
  offlineByCode.set(out.code, ctx.oidc.params.access_type === 'offline' && (first || consent));
});
provider.on('grant.success', (ctx) => {
  const type = ctx.oidc.params.grant_type;
  counts[type] = (counts[type] || 0) + 1;
});
provider.on('grant.error', (ctx, err) => {
  counts[`error:${err.error}`] = (counts[`error:${err.error}`] || 0) + 1;
});
provider.on('server_error', (ctx, err) => { console.error('server_error', err); });

// Google's answers: prefixed tokens, no refresh_token on refresh, its error wording.
provider.use(async (ctx, next) => {
  await next();
  if (ctx.oidc?.route !== 'token' || !ctx.body || typeof ctx.body !== 'object') return;
  const grantType = ctx.oidc.params?.grant_type;
  if (ctx.body.access_token) ctx.body.access_token = AT + ctx.body.access_token;
  if (grantType === 'refresh_token') delete ctx.body.refresh_token;
  else if (ctx.body.refresh_token) ctx.body.refresh_token = RT + ctx.body.refresh_token;
  if (ctx.body.error === 'invalid_grant' && grantType === 'refresh_token') {
    ctx.body.error_description = 'Token has been expired or revoked.';
  }
});

const unprefix = (value, prefix) => (typeof value === 'string' && value.startsWith(prefix)
  ? value.slice(prefix.length) : value);

function send(res, status, doc) {
  res.statusCode = status;
  res.setHeader('content-type', 'application/json; charset=utf-8');
  res.end(JSON.stringify(doc));
}

async function readBody(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return Buffer.concat(chunks).toString();
}

// Token and revocation requests: the client secret from the body into Basic (Google takes
// both), "client_secret is missing." without one, the prefixes off, and Workspace reauth.
async function rewrite(req, res) {
  const body = querystring.parse(await readBody(req));
  let auth = req.headers.authorization;
  if (!auth && body.client_id) {
    if (!body.client_secret) {
      send(res, 400, { error: 'invalid_request', error_description: 'client_secret is missing.' });
      return false;
    }
    auth = `Basic ${Buffer.from(`${encodeURIComponent(body.client_id)}:${encodeURIComponent(body.client_secret)}`).toString('base64')}`;
  }
  if (!auth) {
    send(res, 400, { error: 'invalid_request', error_description: 'client_secret is missing.' });
    return false;
  }
  delete body.client_secret;
  delete body.client_id;
  body.refresh_token = unprefix(body.refresh_token, RT);
  body.token = unprefix(unprefix(body.token, RT), AT);
  if (body.refresh_token === undefined) delete body.refresh_token;
  if (body.token === undefined) delete body.token;
  if (body.grant_type === 'refresh_token' && body.refresh_token) {
    const rt = await provider.RefreshToken.find(body.refresh_token);
    const email = rt && `${rt.accountId}@gmail.test`;
    if (email && reauth.has(email)) {
      counts['error:invalid_rapt'] = (counts['error:invalid_rapt'] || 0) + 1;
      send(res, 400, { error: 'invalid_grant', error_description: 'reauth related error (invalid_rapt)',
        error_uri: 'https://support.google.com/a/answer/9368756', error_subtype: 'invalid_rapt' });
      return false;
    }
  }
  req.headers.authorization = auth;
  req.body = querystring.stringify(body);
  return true;
}

// GET /tokeninfo?access_token=ya29...: what Google says about an access token.
async function tokeninfo(url, res) {
  const at = await provider.AccessToken.find(unprefix(url.searchParams.get('access_token'), AT));
  if (!at) {
    send(res, 400, { error: 'invalid_token', error_description: 'Invalid Value' });
    return;
  }
  const scopes = String(at.scope || '').split(' ');
  const doc = { azp: at.clientId, aud: at.clientId, sub: `1${Buffer.from(at.accountId).toString('hex')}`,
    scope: scopes.join(' '), exp: String(at.exp), expires_in: String(at.exp - Math.floor(Date.now() / 1000)),
    access_type: at.grantId && offlineGrants.has(at.grantId) ? 'offline' : 'online' };
  if (scopes.includes('email') || scopes.includes(`${G}userinfo.email`)) {
    Object.assign(doc, { email: `${at.accountId}@gmail.test`, email_verified: 'true' });
  }
  send(res, 200, doc);
}
const offlineGrants = new Set();
provider.on('refresh_token.saved', (token) => offlineGrants.add(token.grantId));

const callback = provider.callback();
server.on('request', async (req, res) => {
  const url = new URL(req.url, issuer);
  try {
    if (url.pathname === '/test/counts') return send(res, 200, counts);
    if (url.pathname === '/test/reauth') {
      reauth.add(url.searchParams.get('email'));
      return send(res, 200, {});
    }
    if (url.pathname === '/tokeninfo') return await tokeninfo(url, res);
    if (req.method === 'POST' && (url.pathname === '/token' || url.pathname === '/revoke')) {
      if (!(await rewrite(req, res))) return undefined;
    }
  } catch (err) {
    console.error(err);
    return send(res, 500, { error: 'internal_failure' });
  }
  return callback(req, res);
});
process.stdout.write(`${JSON.stringify({ issuer, direct: issuer })}\n`);
