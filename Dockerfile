# The production image: one image for every process (web, the worker pools, the release phase, the admin CLI), built
# in stages. `build` installs every dependency and compiles the service to dist/ (npm run build); `deps` installs the
# production dependencies alone; the final stage holds dist/ and those, runs as the unprivileged `node` user with
# NODE_ENV=production (every production guard on: required secrets, no loopback webhooks), and no tsx, TypeScript or
# test tool is in it.
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
COPY clients/typescript/package.json clients/typescript/
# npm install, not npm ci: some optional platform builds are not in the lockfile (see docs/operating.md). No scripts:
# the repository's prepare builds the typed client for integrators, which the image does not need; esbuild (tsx's)
# is not run at build time either, tsc compiles.
RUN npm install --ignore-scripts --no-audit --no-fund
COPY . .
RUN npm run build

FROM node:20-bookworm-slim AS deps
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json ./
COPY clients/typescript/package.json clients/typescript/
RUN npm install --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force

FROM node:20-bookworm-slim AS production
WORKDIR /app
ENV NODE_ENV=production
# Owned by root, read by `node`: the running service cannot rewrite its own code or dependencies.
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json Procfile ./
USER node
EXPOSE 3000
# The web process's liveness (the image's default command); worker containers override it with their own port's
# /health (WORKER_METRICS_PORT), as docker-compose.yml does.
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 3000) + '/health').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# Exec form everywhere: node is PID 1 and receives SIGTERM itself, so it drains.
CMD ["node", "--enable-source-maps", "--max-semi-space-size=32", "dist/api/main.js"]
