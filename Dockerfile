# One image for the gateway, the worker and the local DynamoDB (docker-compose.yml picks the command).
FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json ./
COPY patches ./patches
COPY scripts ./scripts
RUN npm ci --no-audit --no-fund
COPY . .
EXPOSE 8080
CMD ["npx", "tsx", "src/main.ts"]
