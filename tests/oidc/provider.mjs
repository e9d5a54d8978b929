// The real OpenID Provider for kubetray's tests: npm oidc-provider on 127.0.0.1, port 0.
// Prints one JSON line {"issuer": ..., "direct": its own address} when ready. Settings come as one JSON argument:
//   {"ttl": {"AccessToken": 60, "IdToken": 60, ...}, "extraClients": [...], "password": true,
//    "dateSkew": 300, "noIdTokenOnRefresh": true, "revocationNeedsClientAuth": true,
//    "signingAlg": "ES256", (RS256 by default; PS256, ES256, EdDSA or Ed25519 for id_tokens)
//    "clientCredentials": true}  (a confidential client "machine", secret "machine-secret",
//    for the client credentials grant; with resource=https://kubernetes.test its access
//    token is a JWT for audience "kubernetes", as an API server can verify with the JWKS),
//    "allowedOrigins": ["https://portal.example"]  (CORS: Origin headers the token endpoint takes)
//    "issuer": "https://127.0.0.1:PORT"  (the URL clients use: a proxy in front, tests/fault_proxy.py;
//    the provider then builds its endpoints from the X-Forwarded-* headers the proxy sends)
//    "clockOffset": 90}  (seconds the provider's clock is ahead; GET /test/clock?offset=S moves it)
// Logins use oidc-provider's devInteractions pages: any login name, any password.
// GET /test/counts: token requests by grant type; GET /test/headers: every request's headers.
import { generateKeyPairSync } from 'node:crypto';
import http from 'node:http';
import Provider, { errors } from 'oidc-provider';

const settings = JSON.parse(process.argv[2] || '{}');

// The provider's own clock (oidc-provider and its JWTs read Date.now): ahead by clockOffset s,
// and movable while it runs (a laptop that slept sees the provider's time jump too).
let clockOffset = Number(settings.clockOffset || 0);
const realNow = Date.now.bind(Date);
Date.now = () => realNow() + clockOffset * 1000;
const ttl = { AccessToken: 3600, IdToken: 3600, RefreshToken: 86400, DeviceCode: 600,
  Grant: 86400, Session: 86400, Interaction: 600, ClientCredentials: 3600, ...(settings.ttl || {}) };

const signingAlg = settings.signingAlg || 'RS256';
const keyType = { ES256: ['ec', { namedCurve: 'P-256' }], EdDSA: ['ed25519', {}], Ed25519: ['ed25519', {}] };
const [kind, options] = keyType[signingAlg] || ['rsa', { modulusLength: 2048 }];
const { privateKey } = generateKeyPairSync(kind, options);
const jwk = { ...privateKey.export({ format: 'jwk' }), kid: 'kubetray-test', use: 'sig', alg: signingAlg };

const nativeClient = (id, extra = {}) => ({
  client_id: id,
  application_type: 'native',
  token_endpoint_auth_method: 'none',
  // RFC 8252 loopback (any port) and kubelogin's exact defaults.
  redirect_uris: ['http://127.0.0.1/', 'http://127.0.0.1/callback', 'http://localhost:8000',
    'http://localhost:18000'],
  grant_types: ['authorization_code', 'refresh_token', 'urn:ietf:params:oauth:grant-type:device_code',
    ...(settings.password ? ['password'] : [])],
  response_types: ['code'],
  id_token_signed_response_alg: signingAlg,
  ...extra,
});

async function findAccount(ctx, id) {
  return {
    accountId: id,
    async claims() {
      return { sub: id, email: `${id}@example.test`, email_verified: true, name: id, groups: ['devs', `team-${id}`] };
    },
  };
}

const server = http.createServer();
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const issuer = settings.issuer || `http://127.0.0.1:${server.address().port}`;

// A confidential client that gets tokens for itself (RFC 6749 §4.4), no person, no redirect.
const machineClient = {
  client_id: 'machine',
  client_secret: 'machine-secret',
  token_endpoint_auth_method: 'client_secret_basic',
  grant_types: ['client_credentials'],
  response_types: [],
  redirect_uris: [],
};
const KUBERNETES = 'https://kubernetes.test';

const provider = new Provider(issuer, {
  clients: [nativeClient('kubectl'), nativeClient('other-audience'),
    ...(settings.clientCredentials ? [machineClient] : []), ...(settings.extraClients || [])],
  jwks: { keys: [jwk] },
  pkce: { required: () => true },
  features: {
    devInteractions: { enabled: true },
    deviceFlow: { enabled: true },
    clientCredentials: { enabled: Boolean(settings.clientCredentials) },
    // Resource indicators (RFC 8707): the one resource server is "the cluster", whose access
    // tokens are JWTs (opaque without a resource, oidc-provider's default).
    resourceIndicators: {
      enabled: true,
      defaultResource: async (ctx, client, oneOf) => oneOf,
      useGrantedResource: async () => false,
      getResourceServerInfo: async (ctx, resourceIndicator) => {
        if (resourceIndicator !== KUBERNETES) throw new errors.InvalidTarget();
        return { scope: 'openid', audience: 'kubernetes', accessTokenFormat: 'jwt',
          accessTokenTTL: ttl.ClientCredentials, jwt: { sign: { alg: signingAlg } } };
      },
    },
    revocation: {
      enabled: true,
      // A provider that lets only authenticated (confidential) clients revoke: a public client
      // gets 401 invalid_client, as some providers answer.
      ...(settings.revocationNeedsClientAuth ? {
        allowedPolicy: async (ctx, client, token) => {
          if (client.clientAuthMethod === 'none') {
            throw new errors.InvalidClient('client authentication is required to revoke tokens');
          }
          return token.clientId === client.clientId;
        },
      } : {}),
    },
  },
  ttl,
  // CORS by client (oidc-provider's clientBasedCORS): a token request that carries an Origin
  // header (kubelogin's --oidc-request-header=Origin=...) from a confidential client is refused
  // by default; settings.allowedOrigins lists the origins allowed instead.
  ...(settings.allowedOrigins ? {
    clientBasedCORS: (ctx, origin) => settings.allowedOrigins.includes(origin),
  } : {}),
  clockTolerance: 0,
  conformIdTokenClaims: false,
  scopes: ['openid', 'offline_access', 'email', 'profile', 'groups'],
  claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'], groups: ['groups'] },
  cookies: { keys: ['kubetray-test-cookie-key'] },
  findAccount,
  issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
  // Consent is not what these tests are about: grant what was asked, once per login.
  async loadExistingGrant(ctx) {
    const { client, session } = ctx.oidc;
    const grantId = ctx.oidc.result?.consent?.grantId || session.grantIdFor(client.clientId);
    if (grantId) {
      const existing = await ctx.oidc.provider.Grant.find(grantId);
      if (existing) return existing;
    }
    const grant = new ctx.oidc.provider.Grant({ clientId: client.clientId, accountId: session.accountId });
    grant.addOIDCScope('openid offline_access email profile groups');
    await grant.save();
    return grant;
  },
});

if (settings.issuer) provider.proxy = true;  // behind tests/fault_proxy.py: trust X-Forwarded-*

if (settings.password) {
  // Resource owner password grant (RFC 6749 §4.3), which oidc-provider leaves to the deployer.
  // Accepts a user when the password is "pw-<user>".
  const parameters = new Set(['username', 'password', 'scope']);
  provider.registerGrantType('password', async (ctx) => {
    const { client, params } = ctx.oidc;
    if (params.password !== `pw-${params.username}`) {
      throw new errors.InvalidGrant('wrong username or password');
    }
    const grant = new provider.Grant({ clientId: client.clientId, accountId: params.username });
    grant.addOIDCScope('openid offline_access email profile groups');
    await grant.save();
    const scope = 'openid offline_access email profile groups';
    const at = new provider.AccessToken({ accountId: params.username, client, grantId: grant.jti, scope, gty: 'password' });
    const accessToken = await at.save();
    const rt = new provider.RefreshToken({ accountId: params.username, client, grantId: grant.jti, scope, gty: 'password' });
    const refreshToken = await rt.save();
    const account = await findAccount(ctx, params.username);
    const claims = await account.claims('id_token', scope, {}, []);
    const token = new provider.IdToken({ ...claims }, { ctx, client });
    token.scope = scope;
    token.set('at_hash', accessToken);
    const idToken = await token.issue({ use: 'idtoken' });
    ctx.body = { access_token: accessToken, id_token: idToken, refresh_token: refreshToken,
      expires_in: at.expiration, token_type: 'Bearer', scope };
  }, parameters);
}

if (settings.noIdTokenOnRefresh) {
  // A provider that never sends an id_token on refresh (OpenID Connect Core §12.2 allows it),
  // through oidc-provider's own post-processing middleware (provider.use).
  provider.use(async (ctx, next) => {
    await next();
    if (ctx.oidc?.route === 'token' && ctx.oidc.params?.grant_type === 'refresh_token'
      && ctx.body && typeof ctx.body === 'object') {
      delete ctx.body.id_token;
    }
  });
}

// Counters the tests read: how many token requests of each grant type, and failures.
const counts = {};
provider.on('grant.success', (ctx) => {
  const type = ctx.oidc.params.grant_type;
  counts[type] = (counts[type] || 0) + 1;
});
provider.on('server_error', (ctx, err) => { console.error('server_error', err); });
provider.on('grant.error', (ctx, err) => {
  const key = `error:${err.error}`;
  counts[key] = (counts[key] || 0) + 1;
});
provider.on('grant.revoked', () => { counts.revoked = (counts.revoked || 0) + 1; });


// Every request's method, path and headers, in order (what --oidc-request-header sent).
const seen = [];

const callback = provider.callback();
server.on('request', (req, res) => {
  if (req.url === '/test/headers') {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify(seen));
    return;
  }
  if (!req.url.startsWith('/test/')) {
    seen.push({ method: req.method, path: req.url.split('?')[0], headers: req.headers });
  }
  if (settings.dateSkew) {  // a provider whose Date header is off by dateSkew seconds
    res.setHeader('date', new Date(Date.now() + settings.dateSkew * 1000).toUTCString());
  } else if (clockOffset) {  // node's own Date header reads the real clock
    res.setHeader('date', new Date(Date.now()).toUTCString());
  }
  if (req.url.startsWith('/test/clock')) {
    const offset = new URL(req.url, 'http://x').searchParams.get('offset');
    if (offset !== null) clockOffset = Number(offset);
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ offset: clockOffset }));
    return;
  }
  if (req.url === '/test/counts') {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify(counts));
    return;
  }
  callback(req, res);
});
process.stdout.write(`${JSON.stringify({ issuer, direct: `http://127.0.0.1:${server.address().port}` })}\n`);
