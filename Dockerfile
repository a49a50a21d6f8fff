# One image for every process (web, workers, migrations, the admin CLI). Dependencies are installed into the image,
# never into a mounted source tree.
FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=development
COPY package.json package-lock.json ./
COPY clients/typescript/package.json clients/typescript/
# npm install, not npm ci: some optional platform builds are not in the lockfile (see README). No scripts: the
# repository's prepare builds the typed client for integrators, which the image does not need.
RUN npm install --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force
COPY . .
USER node
EXPOSE 3000
# Exec form everywhere: node is PID 1 and receives SIGTERM itself, so it drains.
CMD ["node", "--import", "tsx", "api/main.ts"]
